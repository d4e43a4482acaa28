"""Swapping our backbone into other shipped detectors and decode heads (issue 3, "Must also work").

Each model comes from mmdet's/mmseg's own `_base_` file with only `backbone` and `neck` replaced
by ours; one real training step on a toy batch must run and change the backbone's weights.
"""

import pytest
import torch
from helpers import REPO
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm
from mmengine.optim import OptimWrapper
from mmengine.registry import init_default_scope
from mmengine.runner import Runner

import mmrecvit.mm  # noqa: F401

pytestmark = pytest.mark.slow

BACKBONE = "dict(_delete_=True, type='PlainViT', arch='tiny', depth=2, out_indices=(0, 1, 1, 1))"
PYRAMID = "dict(type='SimplePyramid', in_channels=192)"
FPN_IN = '[48, 96, 192, 192]'
DET_CASES = {
    'faster-rcnn_r50_fpn': f"[{PYRAMID}, dict(type='FPN', in_channels={FPN_IN}, out_channels=256, num_outs=5)]",
    'retinanet_r50_fpn': f"[{PYRAMID}, dict(type='FPN', in_channels={FPN_IN}, out_channels=256, start_level=1, "
    "add_extra_convs='on_input', num_outs=5)]",
    'cascade-mask-rcnn_r50_fpn': f"[{PYRAMID}, dict(type='FPN', in_channels={FPN_IN}, out_channels=256, num_outs=5)]",
}


def build_and_step(cfg_text, tmp_path, data_cfg, scope):
    path = tmp_path / 'swap.py'
    path.write_text(cfg_text)
    cfg = Config.fromfile(str(path))
    init_default_scope(scope)
    registry = __import__(f'{scope}.registry', fromlist=['MODELS']).MODELS
    model = revert_sync_batchnorm(registry.build(cfg.model))
    model.init_weights()
    loader = Runner.build_dataloader(data_cfg)
    optim = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.01))
    before = model.backbone.blocks[0].attn.qkv.weight.detach().clone()
    log_vars = model.train_step(next(iter(loader)), optim)
    assert torch.isfinite(log_vars['loss'])
    assert not torch.equal(before, model.backbone.blocks[0].attn.qkv.weight)
    return log_vars


def loader_cfg(config, data_root, task):
    cfg = Config.fromfile(f'{REPO}/{config}')
    dl = cfg.train_dataloader
    dl.update(batch_size=2, num_workers=0, persistent_workers=False)
    dl.dataset.data_root = data_root
    return dl


@pytest.mark.parametrize('base', sorted(DET_CASES))
def test_other_mmdet_detectors_train_with_our_backbone(base, toy_root, tmp_path):
    text = (
        f"_base_ = ['mmdet::_base_/models/{base}.py']\n"
        "custom_imports = dict(imports=['mmrecvit.mm'], allow_failed_imports=False)\n"
        f'model = dict(backbone={BACKBONE}, neck={DET_CASES[base]})\n'
    )
    data = loader_cfg('configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py', f'{toy_root}/toy_coco/', 'det')
    log_vars = build_and_step(text, tmp_path, data, 'mmdet')
    assert any(k.startswith('loss_cls') or k.startswith('s0.loss_cls') for k in log_vars)


def test_mmseg_fpn_head_trains_with_our_backbone(toy_root, tmp_path):
    text = (
        "_base_ = ['mmseg::_base_/models/fpn_r50.py']\n"
        "custom_imports = dict(imports=['mmrecvit.mm'], allow_failed_imports=False)\n"
        "# besides backbone/neck, only what the dataset dictates: ADE20K's 150 classes, a fixed batch size\n"
        f'model = dict(pretrained=None, data_preprocessor=dict(size=(256, 256)), backbone={BACKBONE}, '
        f"neck=[{PYRAMID}, dict(type='FPN', in_channels={FPN_IN}, out_channels=256, num_outs=4)], "
        'decode_head=dict(num_classes=150))\n'
    )
    data = loader_cfg(
        'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py',
        f'{toy_root}/toy_ade/ADEChallengeData2016',
        'seg',
    )
    log_vars = build_and_step(text, tmp_path, data, 'mmseg')
    assert 'decode.loss_ce' in log_vars
