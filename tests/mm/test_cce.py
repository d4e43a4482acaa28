"""Edge-RecViT's CCE loss (issue 37.3, mmrecvit/mm/cce.py): the classifier's logits scaled by the mean confidence of
each image's depth decisions, the classification loss reaching the ranker through it."""

import pytest
import torch
from mmengine.registry import DefaultScope
from mmpretrain.structures import DataSample

import mmrecvit.mm.cce  # noqa: F401  (registers ConfidenceScaledClassifier, as a config's custom_imports does)

pytestmark = pytest.mark.usefixtures('one_thread')


def classifier(kind, backbone='EdgeRecViT'):
    from mmpretrain.registry import MODELS

    torch.manual_seed(0)
    cfg = dict(
        type=kind,
        backbone=dict(
            type=backbone, arch='tiny', embed_dim=32, num_heads=2, depth=4, img_size=32, out_type='cls_token'
        ),
        head=dict(type='VisionTransformerClsHead', num_classes=3, in_channels=32, loss=dict(type='CrossEntropyLoss')),
    )
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        model = MODELS.build(cfg)
    torch.nn.init.normal_(model.head.layers.head.weight)  # its zero init would give zero logits
    return model


def test_logits_are_scaled_by_each_images_mean_confidence():
    plain, cce = classifier('ImageClassifier').eval(), classifier('ConfidenceScaledClassifier').eval()
    cce.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        feats = plain.backbone(x)
        logits = plain.head(feats)
        confidence = feats.stats.token_maps['confidence'].flatten(1).mean(1, keepdim=True)
        scores = torch.stack([s.pred_score for s in cce.predict(x)])
    assert 0 < confidence.min() and confidence.max() <= 1
    torch.testing.assert_close(scores, (logits * confidence).softmax(-1))


def test_the_classification_loss_trains_the_ranker_through_the_confidence():
    model = classifier('ConfidenceScaledClassifier').train()
    model.backbone.stb_loss_weight = model.backbone.du_loss_weight = 0.0
    samples = [DataSample().set_gt_label(i) for i in (0, 2)]
    model.backbone.gumbel_tau = 1e-4  # training depths at the argmax: no straight-through gradient to speak of
    loss = model.loss(torch.randn(2, 3, 32, 32), samples)['loss']
    loss.backward()
    assert model.backbone.ranker.fc1.weight.grad.abs().sum() > 0


def test_a_backbone_without_confidences_is_refused():
    model = classifier('ConfidenceScaledClassifier', backbone='PlainViT')
    with pytest.raises(KeyError, match='PlainViT gives no confidence token map'):
        model.predict(torch.randn(1, 3, 32, 32))
