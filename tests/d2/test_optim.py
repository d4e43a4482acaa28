"""detectron2 adapter (mmrecvit/d2/optim.py): layer decay from the backbones' recursion-aware depths, ViTDet's
own on a plain ViT."""

import pytest
from detectron2.config import LazyConfig, instantiate
from detectron2.modeling.backbone.vit import get_vit_lr_decay_rate
from helpers import REPO

from mmrecvit.d2 import layer_decay_lr_factor, optimizer_params
from mmrecvit.d2.checkpoint import recvit_backbone

pytestmark = pytest.mark.usefixtures('one_thread')

TOY = f'{REPO}/configs/d2/toy/mask_rcnn_{{}}_ti_toy_coco.py'


def test_layer_decay_uses_the_backbones_recursion_aware_depths():
    cfg = LazyConfig.load(TOY.format('naiverecvit'))
    cfg.model.backbone.net.update(pretrained=None)
    model = instantiate(cfg.model)
    bb = recvit_backbone(model)
    factor = layer_decay_lr_factor(model, 0.7)
    for name, _ in model.named_parameters():
        if name.startswith('backbone.net.net.'):
            own = name[len('backbone.net.net.') :]
            assert factor(name) == pytest.approx(0.7 ** (bb.num_layers + 1 - bb.layer_depth(own))), name
        else:
            assert factor(name) == 1.0, name
    # block 0 of 2 runs at steps 0, 2, 4 (positions 1, 3, 5): the mean depth 3, not detectron2's name-parsed 1
    assert factor('backbone.net.net.blocks.0.attn.qkv.weight') == pytest.approx(0.7 ** (bb.num_layers + 1 - 3))
    groups = optimizer_params(model, base_lr=1e-3, layer_decay_rate=0.7, weight_decay_norm=0.0)
    lrs = {id(p): g['lr'] for g in groups for p in g['params']}
    for name, p in model.named_parameters():
        assert lrs[id(p)] == pytest.approx(1e-3 * factor(name)), name


def test_on_a_plain_vit_the_depths_are_vitdets():
    """PlainViT's layer depths give detectron2's get_vit_lr_decay_rate (which has no CLS token)."""
    model = instantiate(LazyConfig.load(TOY.format('plainvit')).model)
    depth = recvit_backbone(model).depth
    factor = layer_decay_lr_factor(model, 0.7)
    for name, _ in model.named_parameters():
        if 'cls_token' not in name:
            assert factor(name) == pytest.approx(get_vit_lr_decay_rate(name, 0.7, depth)), name
