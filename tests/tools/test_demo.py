"""tools/demo.py's arguments and schedule (the demo end to end: tests/e2e/test_train_test.py)."""

import os.path as osp
import sys

import pytest
from helpers import REPO

sys.path.insert(0, osp.join(REPO, 'tools'))
import demo as demo_tool  # noqa: E402  (tools/demo.py)


@pytest.mark.parametrize('iters', [2, 40, 300])
def test_demo_iters_stretches_the_schedule_to_its_end(iters):
    """--iters N: the decay that ended at the config's last iteration ends at N (the warm-up stays)."""
    from mmengine.config import Config

    cfg = Config.fromfile(osp.join(REPO, 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py'))
    warmup, decay = (dict(p) for p in cfg.param_scheduler)
    interval = cfg.default_hooks.logger.interval
    demo_tool.stretch_schedule(cfg, iters)
    assert cfg.train_cfg.max_iters == iters
    assert dict(cfg.param_scheduler[0]) == warmup
    if iters > decay['begin']:
        assert cfg.param_scheduler[1]['end'] == iters
        assert cfg.param_scheduler[1]['T_max'] == iters - decay['begin']
    else:  # shorter than the warm-up: the decay phase never starts and is left as it was
        assert dict(cfg.param_scheduler[1]) == decay
    # the log shows every iteration of a short run, and at least 10 of a longer one
    assert cfg.default_hooks.logger.interval == {2: 1, 40: 4, 300: min(30, interval)}[iters]


@pytest.mark.parametrize('iters', ['0', '-3'])
def test_demo_refuses_a_non_positive_iters(iters, capsys):
    with pytest.raises(SystemExit):
        demo_tool.main(['--iters', iters])
    assert f'--iters must be >= 1 (training iterations), got {iters}' in capsys.readouterr().err


def test_demo_refuses_a_data_root_without_toy_sets(tmp_path):
    with pytest.raises(SystemExit, match='no toy set at toy_coco.*make_toy_data.py --out'):
        demo_tool.main(['--data-root', str(tmp_path), '--work-dir', str(tmp_path / 'w')])
