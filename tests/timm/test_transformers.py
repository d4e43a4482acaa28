"""Hugging Face transformers (the [hf] extra) takes our models through its timm backbone (`TimmBackboneConfig`, as
with timm's own ViTs): `TimmBackbone` gives every method's maps, and a DETR detector built on one runs a training
step. UperNet training on the toy ADE20K set is tests/e2e/test_transformers.py."""

import pytest
import torch

from mmrecvit.timm import METHODS

transformers = pytest.importorskip('transformers')
pytestmark = pytest.mark.usefixtures('one_thread')


@pytest.mark.parametrize('method', sorted(METHODS))
def test_timm_backbone_gives_every_methods_maps(method):
    from transformers import TimmBackbone, TimmBackboneConfig

    torch.manual_seed(0)
    backbone = TimmBackbone(TimmBackboneConfig(backbone=f'{method}_tiny_patch16_224', out_indices=(2, 5, 8, 11)))
    assert backbone.channels == [192] * 4 and backbone.out_features == ['layer2', 'layer5', 'layer8', 'layer11']
    backbone.eval()
    timm_model = backbone._backbone.model  # our classifier in timm's feature wrapper, pruned to the features
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        maps = backbone(x).feature_maps
        ref = timm_model.forward_intermediates(x, indices=[2, 5, 8, 11], intermediates_only=True)
    assert [m.shape for m in maps] == [(1, 192, 4, 6)] * 4
    torch.testing.assert_close(list(maps), ref, rtol=0, atol=0)


def test_detr_on_our_backbone_runs_a_training_step():
    from transformers import DetrConfig, DetrForObjectDetection, TimmBackboneConfig

    torch.manual_seed(0)
    config = DetrConfig(
        backbone_config=TimmBackboneConfig(backbone='morvit_tiny_patch16_224', out_indices=(-1,)),
        num_labels=5,
        num_queries=10,
        d_model=64,
        encoder_layers=1,
        decoder_layers=1,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
    )
    model = DetrForObjectDetection(config)
    backbone = model.model.backbone.model.model.backbone  # DETR's encoder -> timm's wrapper -> ours
    assert type(backbone).__name__ == 'MoRViT'
    images = torch.randn(2, 3, 96, 96)
    labels = [
        dict(class_labels=torch.tensor([1, 3]), boxes=torch.tensor([[0.5, 0.5, 0.3, 0.2], [0.3, 0.6, 0.2, 0.3]])),
        dict(class_labels=torch.tensor([0]), boxes=torch.tensor([[0.4, 0.4, 0.5, 0.5]])),
    ]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    out = model(pixel_values=images, labels=labels)
    assert {'loss_ce', 'loss_bbox', 'loss_giou'} <= set(out.loss_dict) and torch.isfinite(out.loss)
    out.loss.backward()
    assert backbone.patch_embed.proj.weight.grad is not None and backbone.patch_embed.proj.weight.grad.abs().sum() > 0
    before = backbone.patch_embed.proj.weight.detach().clone()
    optimizer.step()
    assert not torch.equal(before, backbone.patch_embed.proj.weight)
