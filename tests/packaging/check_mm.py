"""What an OpenMMLab user of the wheel runs (`pip install "mmrecvit[mm]"`, mmcv-lite: nothing compiled): a config
of their own that inherits the toy Mask R-CNN installed with the package (`_base_ = 'mmrecvit::det/...'`), trained
two iterations on a small toy COCO set written by the package. Run by tests/packaging/test_packaging.py in a fresh
venv:

    python tests/packaging/check_mm.py WORK_DIR

mmdet's inferencer is imported before mmrecvit (issue 46.5): the `.pth` the wheel installs lets mmcv-lite find its
ops whatever is imported first. Prints the ops backend, the config it inherited and the losses; exits non-zero on a
failure.
"""

import math
import os.path as osp
import sys

from mmdet.apis import DetInferencer  # noqa: F401  (first: the wheel's import hook finds mmcv-lite's ops)

# isort: split
import mmrecvit.mm  # noqa: F401  (after mmdet: the import order does not matter)

# isort: split
from mmengine.config import Config
from mmengine.runner import Runner

from mmrecvit.configs import config_path
from mmrecvit.datasets import make_toy_data, toy_data_cfg
from mmrecvit.mm.mmcv_ext import backend

work = sys.argv[1]
base = 'mmrecvit::det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py'
print('ops:', backend(), '| config:', config_path(base))
make_toy_data(osp.join(work, 'data'), which=['coco'], size=128, coco_train=4, coco_val=2, progress=False)
user_config = osp.join(work, 'my_detector.py')
with open(user_config, 'w') as f:
    f.write(f'_base_ = [{base!r}]\ntrain_cfg = dict(max_iters=2, val_interval=100)\n')
cfg = Config.fromfile(user_config)
cfg.merge_from_dict(
    {
        **toy_data_cfg('det', osp.join(work, 'data')),
        'work_dir': osp.join(work, 'run'),
        'train_dataloader.batch_size': 2,
        'train_dataloader.num_workers': 0,
        'train_dataloader.persistent_workers': False,
        'default_hooks.logger.interval': 1,
        'default_hooks.checkpoint.interval': 2,
    }
)
runner = Runner.from_cfg(cfg)
runner.train()
losses = runner.message_hub.get_scalar('train/loss').data[0]
assert runner.iter == 2 and len(losses) == 2 and all(math.isfinite(v) for v in losses), losses
print('trained', runner.iter, 'iterations, losses', [round(float(v), 4) for v in losses])
