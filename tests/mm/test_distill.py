"""Distillation from a frozen teacher (mmrecvit.mm.distill): one training loop, losses in the loss dict."""

import pytest
import timm
import torch
from mmpretrain.structures import DataSample

import mmrecvit.mm.distill  # noqa: F401  (registers DistillImageClassifier, as a config's custom_imports does)
from mmrecvit.models.checkpoint import CheckpointError

pytestmark = pytest.mark.usefixtures('one_thread')


@pytest.fixture(scope='module')
def teacher_file(tmp_path_factory):
    torch.manual_seed(0)
    teacher = timm.create_model('vit_tiny_patch16_224', num_classes=5, img_size=64, depth=2, embed_dim=48, num_heads=3)
    path = tmp_path_factory.mktemp('teacher') / 'teacher.pth'
    torch.save({'model': teacher.state_dict()}, path)  # DeiT's layout
    return str(path)


def student(teacher_file, **kwargs):
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS

    torch.manual_seed(0)
    teacher = dict(
        source='timm',
        model='vit_tiny_patch16_224',
        checkpoint=teacher_file,
        model_kwargs=dict(num_classes=5, img_size=64, depth=2, embed_dim=48, num_heads=3),
    )
    with DefaultScope.overwrite_default_scope('mmpretrain'):  # other tests leave mmdet's or mmseg's set
        return MODELS.build(
            dict(
                type='DistillImageClassifier',
                backbone=dict(
                    type='MoRViT',
                    arch='tiny',
                    embed_dim=32,
                    num_heads=2,
                    num_recursions=3,
                    img_size=64,
                    out_type='cls_token',
                ),
                head=dict(type='VisionTransformerClsHead', num_classes=5, in_channels=32),
                **{'teacher': teacher, **kwargs},
            )
        )


def batch():
    samples = [DataSample().set_gt_label(i) for i in (0, 3)]
    return torch.randn(2, 3, 64, 64), samples


@pytest.mark.parametrize('logit_loss', ['soft', 'hard'])
def test_distillation_losses_train_the_student_only(teacher_file, logit_loss):
    model = student(teacher_file, logit_loss=logit_loss).train()
    assert model.teacher.training is False and 'teacher' not in dict(model.named_children())
    assert not any(k.startswith('teacher') for k in model.state_dict())  # not in the student's checkpoints
    before = {k: v.clone() for k, v in model.teacher.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = model.loss(*batch())
    assert set(losses) >= {'loss', 'loss_distill_feature', 'loss_distill_logit'}
    assert all(torch.isfinite(v) and v > 0 for k, v in losses.items() if k.startswith('loss_distill'))
    sum(losses.values()).backward()
    optimizer.step()
    assert model.feature_proj.weight.grad is not None and model.backbone.patch_embed.proj.weight.grad is not None
    assert all(torch.equal(v, model.teacher.state_dict()[k]) for k, v in before.items())  # frozen
    model.train()
    assert model.teacher.training is False


def test_feature_loss_matches_a_hand_count(teacher_file):
    model = student(teacher_file, logit_loss_weight=0.0).eval()
    images, samples = batch()
    with torch.no_grad():
        losses = model.loss(images, samples)
        tokens, _ = model.backbone.forward_intermediates(images, 1, output_fmt='NLC')
        expected = ((model.feature_proj(tokens) - model.teacher.forward_features(images)) ** 2).mean()
    torch.testing.assert_close(losses['loss_distill_feature'], expected)
    assert 'loss_distill_logit' not in losses


def test_bad_teachers_are_named(teacher_file, tmp_path):
    with pytest.raises(ValueError, match="needs model='<timm model name>'"):
        student(teacher_file, teacher=dict(source='timm', checkpoint=teacher_file))
    (tmp_path / 'bad.pth').write_bytes(b'not a checkpoint')
    with pytest.raises(CheckpointError, match='bad.pth'):
        student(
            teacher_file,
            teacher=dict(source='timm', model='vit_tiny_patch16_224', checkpoint=str(tmp_path / 'bad.pth')),
        )
    with pytest.raises(ValueError, match='teacher source'):
        student(teacher_file, teacher=dict(source='hub', checkpoint=teacher_file))
