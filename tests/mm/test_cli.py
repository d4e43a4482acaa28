"""The tools' Runner construction (mmrecvit/mm/cli.py)."""

import os.path as osp
import sys

import pytest
from helpers import REPO, toy_cfg_options

sys.path.insert(0, osp.join(REPO, 'tools'))
import demo as demo_tool  # noqa: E402  (tools/demo.py)
import train as train_tool  # noqa: E402  (tools/train.py)

pytestmark = pytest.mark.slow

DET = osp.join(REPO, 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py')


def test_each_runner_draws_with_its_own_visualizer(toy_root, tmp_path):
    """A det run after a det and a cls run in one process draws with a det visualizer (the hooks take the
    current instance; the det one's reused name used to leave the cls one current)."""
    from mmdet.visualization import DetLocalVisualizer
    from mmengine.visualization import Visualizer

    from mmrecvit.mm import cli

    for i, (task, config) in enumerate([('det', DET), ('cls', demo_tool.toy_config('cls', 'plainvit')), ('det', DET)]):
        args = train_tool.parse_args([config, *toy_cfg_options(task, toy_root, tmp_path / str(i))])
        runner = cli.build_runner(cli.load_config(args), 'none', tool='test')
        assert Visualizer.get_current_instance() is runner.visualizer
    assert isinstance(runner.visualizer, DetLocalVisualizer)
