"""What a core user (`pip install mmrecvit`: torch + timm) runs: `import mmrecvit`, then a forward of every backbone
and every timm model it registers; then `import mmrecvit.mm`, which registers nothing without OpenMMLab. Run by
tests/packaging/test_packaging.py in a fresh venv, and in this one with the other frameworks made absent:

    python tests/packaging/check_core.py [--absent mmengine mmcv ...]

`--absent` makes those modules unimportable, as if not installed (`sys.modules[name] = None`: `import` raises
ImportError and `importlib.util.find_spec` returns None). Prints one line per check; exits non-zero on a failure.
"""

import argparse
import os.path as osp
import sys

parser = argparse.ArgumentParser()
parser.add_argument('--absent', nargs='*', default=[], help='modules to make unimportable first')
args = parser.parse_args()
for name in args.absent:
    sys.modules[name] = None

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # tests/: backbone_cases.py
import timm  # noqa: E402
import torch  # noqa: E402
from backbone_cases import BACKBONE_CASES  # noqa: E402

import mmrecvit  # noqa: E402
from mmrecvit.models import BACKBONES  # noqa: E402
from mmrecvit.timm import register_timm_models  # noqa: E402

print('mmrecvit', mmrecvit.__version__, 'from', osp.dirname(mmrecvit.__file__))
assert set(BACKBONES) == set(BACKBONE_CASES), f'backbones without a tiny case: {set(BACKBONES) ^ set(BACKBONE_CASES)}'
x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    for name, kwargs in sorted(BACKBONE_CASES.items()):
        feats = BACKBONES[name](**kwargs).eval()(x)
        assert all(torch.isfinite(f).all() for f in feats), name
        print(f'backbone {name}: {[tuple(f.shape) for f in feats]}')
    names = register_timm_models()
    assert names and set(names) <= set(timm.list_models()), 'mmrecvit models missing from timm'
    for name in names:
        if '_tiny_' in name:  # a forward at the tiny size; every size is built (on the meta device) below
            logits = timm.create_model(name, num_classes=7, img_size=64).eval()(x)
            assert logits.shape == (1, 7) and torch.isfinite(logits).all(), name
        with torch.device('meta'):
            timm.create_model(name, num_classes=7)
    print(f'timm models: {len(names)} built, {sum("_tiny_" in n for n in names)} run')
present = [
    m for m in ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'mmpretrain', 'detectron2') if sys.modules.get(m) is not None
]
print('frameworks imported:', ', '.join(present) or 'none')
import mmrecvit.mm  # noqa: E402  (the OpenMMLab side: nothing registered where it is absent or does not import)

print('OpenMMLab scopes registered:', ', '.join(mmrecvit.mm.register_all()) or 'none')
