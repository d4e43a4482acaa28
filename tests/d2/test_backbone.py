"""detectron2 adapter (mmrecvit/d2/backbone.py, checkpoint.py): every backbone is a registered detectron2
Backbone with the mm backbone's features, and checkpoints go strictly both ways (mm, classifier, timm).

detectron2 is part of the set-up (scripts/setup.sh), so it is imported, not skipped."""

import pytest
import torch
from backbone_cases import BACKBONE_CASES
from detectron2.modeling import BACKBONE_REGISTRY

from mmrecvit import models
from mmrecvit.d2 import D2_BACKBONES, export_backbone, load_backbone
from mmrecvit.models.checkpoint import CheckpointError

pytestmark = pytest.mark.usefixtures('one_thread')


def mm_backbone(name, **kw):
    from mmdet.registry import MODELS

    import mmrecvit.mm  # noqa: F401  (registers the backbones into mmdet)

    return MODELS.build(dict(type=name, **BACKBONE_CASES[name], **kw))


def save(obj, tmp_path, name='ckpt.pth'):
    path = tmp_path / name
    torch.save(obj, path)
    return str(path)


def as_detector_checkpoint(backbone):
    """An mmengine checkpoint of a detector holding `backbone` (neck and head keys the filter must drop)."""
    sd = {f'backbone.{k}': v for k, v in backbone.state_dict().items()}
    sd.update({'neck.0.lateral.weight': torch.zeros(2), 'rpn_head.rpn_conv.weight': torch.zeros(2)})
    return {'meta': {'epoch': 1}, 'state_dict': sd}


def test_every_backbone_is_a_registered_detectron2_backbone():
    assert list(D2_BACKBONES) == list(models.BACKBONES)
    for name, cls in D2_BACKBONES.items():
        assert BACKBONE_REGISTRY.get(name) is cls and cls.core is models.BACKBONES[name]
        bb = cls(**BACKBONE_CASES[name], square_pad=64)
        shapes = bb.output_shape()
        assert list(shapes) == [f'layer{i}' for i in bb.net.out_indices]
        assert {(s.channels, s.stride) for s in shapes.values()} == {(bb.net.embed_dim, 16)}
        assert bb.size_divisibility == 16
        assert bb.padding_constraints == {'size_divisibility': 16, 'square_size': 64}
    with pytest.raises(ValueError, match="out_type must be 'featmap'"):
        D2_BACKBONES['PlainViT'](**BACKBONE_CASES['PlainViT'], out_type='cls_token')


@pytest.mark.parametrize('name', list(BACKBONE_CASES))
def test_features_equal_the_mmdet_backbones_for_the_same_weights(name, tmp_path):
    mm = mm_backbone(name).eval()
    path = save(as_detector_checkpoint(mm), tmp_path)
    d2 = D2_BACKBONES[name](**BACKBONE_CASES[name], pretrained=path).eval()  # strict, through the one filter
    x = torch.randn(2, 3, 70, 90)  # odd size: both pad to the patch grid
    with torch.no_grad():
        ref, out = mm(x), d2(x)
    assert list(out) == [f'layer{i}' for i in mm.out_indices] and len(ref) == len(out) == 4
    for r, o in zip(ref, out.values()):
        assert o.shape == (2, mm.embed_dim, 5, 6)
        torch.testing.assert_close(o, r, rtol=0, atol=0)


@pytest.mark.parametrize('name', list(BACKBONE_CASES))
def test_checkpoint_round_trip_mm_to_d2_to_mm_is_strict(name, tmp_path):
    mm = mm_backbone(name)
    d2 = D2_BACKBONES[name](**BACKBONE_CASES[name])
    load_backbone(d2, save(as_detector_checkpoint(mm), tmp_path))
    back = tmp_path / 'back.pth'
    export_backbone(d2, back)
    again = mm_backbone(name, init_cfg=dict(type='Pretrained', checkpoint=str(back)))
    again.init_weights()
    ref = mm.state_dict()
    assert set(again.state_dict()) == set(ref)
    for k, v in again.state_dict().items():
        assert torch.equal(v, ref[k]), k
    bad = as_detector_checkpoint(mm)
    bad['state_dict']['backbone.extra.weight'] = torch.zeros(1)
    with pytest.raises(CheckpointError, match='unexpected keys.*extra.weight'):
        load_backbone(d2, save(bad, tmp_path, 'bad.pth'))


@pytest.mark.parametrize('name', ['PlainViT', 'MoRViT'])
def test_a_classifier_checkpoint_loads_strictly(name, tmp_path):
    cls = mm_backbone(name, out_type='cls_token')  # final norm; mmpretrain's layout adds a head
    sd = {f'backbone.{k}': v for k, v in cls.state_dict().items()}
    sd['head.layers.head.weight'] = torch.zeros(5, cls.embed_dim)
    d2 = D2_BACKBONES[name](**BACKBONE_CASES[name], pretrained=save({'state_dict': sd}, tmp_path))
    for k, v in d2.net.state_dict().items():
        assert torch.equal(v, sd[f'backbone.{k}']), k


def test_timm_weights_load_through_the_same_filter(tmp_path):
    from timm.models.vision_transformer import VisionTransformer

    case = BACKBONE_CASES['PlainViT']
    timm = VisionTransformer(
        img_size=case['img_size'],
        patch_size=16,
        embed_dim=case['embed_dim'],
        depth=case['depth'],
        num_heads=case['num_heads'],
        num_classes=10,
    )
    path = save({'model': timm.state_dict()}, tmp_path)  # DeiT's layout
    d2 = D2_BACKBONES['PlainViT'](**case, pretrained=path)
    core = models.PlainViT(**case, pretrained=path)
    core.init_weights()
    for k, v in core.state_dict().items():
        assert torch.equal(d2.net.state_dict()[k], v), k
    assert torch.equal(d2.net.blocks[2].mlp.fc1.weight, timm.blocks[2].mlp.fc1.weight)


def test_a_vitdet_configs_out_feature_and_in_feature_are_taken():
    """ViTDet's config names the ViT's map `out_feature` and reads it with `in_feature='${.net.out_feature}'`: our
    backbones take `out_feature` (the last map's name), detectron2's pyramid reads it unchanged, and ours takes an
    `in_feature` naming that last map."""
    from detectron2.modeling import SimpleFeaturePyramid

    from mmrecvit.d2 import LayerFeaturePyramid

    torch.manual_seed(0)
    net = D2_BACKBONES['SRViT'](**BACKBONE_CASES['SRViT'], out_feature='last_feat')
    names = [f'layer{i}' for i in net.net.out_indices[:-1]] + ['last_feat']
    assert list(net.output_shape()) == names
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        maps = net.eval()(x)
        assert list(maps) == names
        theirs = SimpleFeaturePyramid(net, in_feature='last_feat', out_channels=8, scale_factors=(2.0, 1.0)).eval()
        assert [tuple(m.shape) for m in theirs(x).values()] == [(1, 8, 8, 8), (1, 8, 4, 4)]
        ours = LayerFeaturePyramid(
            net, in_features=names[-2:], in_feature='last_feat', out_channels=8, scale_factors=(2.0, 1.0)
        )
        assert [tuple(m.shape) for m in ours.eval()(x).values()] == [(1, 8, 8, 8), (1, 8, 4, 4)]
    with pytest.raises(ValueError, match=r"in_feature='layer2' must name the last of in_features \["):
        LayerFeaturePyramid(net, in_features=names[-2:], in_feature='layer2', out_channels=8, scale_factors=(2.0, 1.0))
