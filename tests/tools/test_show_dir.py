"""`tools/test.py --show-dir DIR` draws every test image into DIR itself, for det, seg and cls (issue 41, item 1),
whatever the interval of the config's visualization hook (mmseg's default 50 drew nothing of the 30-image toy set;
mmdet put the pictures under `<work-dir>/<timestamp>/DIR`, mmseg under `DIR/vis_data/vis_image/`)."""

import os
import os.path as osp
import sys

import pytest
import torch
from helpers import REPO, cached_config, toy_cfg_options

from mmrecvit.mm.tooling import build_model

sys.path.insert(0, osp.join(REPO, 'tools'))
import test as test_tool  # noqa: E402  (tools/test.py)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures('one_thread')]
CONFIGS = {
    'det': 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py',
    'seg': 'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py',
    'cls': 'configs/cls/plainvit-ti_1xb32-200it_toy-cls.py',
}
# The toy sets of `toy_root` (tests/conftest.py): 4 det and seg val images, 5 cls ones.
EXPECTED = {
    'det': [f'00000100000{i}.jpg' for i in range(1, 5)],  # mmdet: the image's file name
    'seg': [f'ADE_val_0000000{i}.png' for i in range(1, 5)],  # SegShowDirVisualizer: the image's stem
    'cls': [f'val_00000{i}.jpg_0.png' for i in range(5)],  # mmpretrain: <file name>_<step>
}


@pytest.mark.parametrize('task', list(CONFIGS))
def test_show_dir_draws_every_test_image_into_the_folder_it_names(task, toy_root, tmp_path, monkeypatch):
    config = osp.join(REPO, CONFIGS[task])
    model, _ = build_model(cached_config(config))
    checkpoint = tmp_path / 'untrained.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, checkpoint)
    monkeypatch.chdir(tmp_path)  # `--show-dir vis` is relative to where the tool runs, as a user types it
    options = toy_cfg_options(task, toy_root, tmp_path / 'work')
    test_tool.main([config, str(checkpoint), '--show-dir', 'vis', *options, 'default_hooks.visualization.interval=50'])
    assert sorted(os.listdir(tmp_path / 'vis')) == EXPECTED[task]
    for name in EXPECTED[task]:
        assert os.path.getsize(tmp_path / 'vis' / name) > 0
