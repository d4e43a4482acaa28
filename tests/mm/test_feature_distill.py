"""Feature distillation without labels (issue 37.1, mmrecvit/mm/feature_distill.py): a frozen timm teacher by name,
the student's final normalised tokens trained to the teacher's, its checkpoint a start for the dense recipes."""

import glob
import os.path as osp

import pytest
import torch
from helpers import REPO, cached_config
from mmengine.registry import DefaultScope

import mmrecvit.mm.feature_distill  # noqa: F401  (registers FeatureDistiller, as a config's custom_imports does)
from mmrecvit.mm.feature_distill import timm_teacher
from mmrecvit.models import BACKBONES

pytestmark = pytest.mark.usefixtures('one_thread')
TEACHER = dict(name='vit_tiny_patch16_224', stand_in_seed=0)  # timm's ViT-Ti, randomly initialised


def distiller(backbone, init_from_teacher=True, teacher=TEACHER):
    from mmpretrain.registry import MODELS

    cfg = dict(type='FeatureDistiller', backbone=backbone, teacher=teacher, init_from_teacher=init_from_teacher)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        model = MODELS.build(cfg)
    model.init_weights()
    return model


def test_a_student_that_represents_the_teacher_starts_at_zero_loss_and_only_the_student_trains():
    model = distiller(dict(type='PlainViT', arch='tiny', final_norm=True, img_size=32)).train()
    x = torch.randn(2, 3, 32, 32)
    loss = model(x, mode='loss')['loss_distill_feature']
    assert loss.item() < 1e-10  # PlainViT from the teacher's weights is the teacher
    assert 'teacher' not in dict(model.named_children()) and not any('teacher' in k for k in model.state_dict())
    model.backbone.blocks[0].mlp.fc1.weight.data.add_(0.1)  # away from the teacher
    loss = model(x, mode='loss')['loss_distill_feature']
    loss.backward()
    assert loss.item() > 0 and model.backbone.blocks[0].mlp.fc1.weight.grad.abs().sum() > 0
    assert all(p.grad is None and not p.requires_grad for p in model.teacher.parameters())


def test_a_method_that_cannot_represent_the_teacher_learns_towards_it():
    model = distiller(dict(type='ReViT', arch='tiny', num_experts=2, final_norm=True, img_size=32)).train()
    x = torch.randn(4, 3, 32, 32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(8):
        loss = model(x, mode='loss')['loss_distill_feature']
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


def test_a_wider_teacher_gets_a_projection_and_the_checkpoint_starts_a_dense_backbone(tmp_path):
    wide = dict(name='vit_small_patch16_224', stand_in_seed=0)
    model = distiller(dict(type='MoRViT', arch='tiny', final_norm=True, img_size=32), False, wide)
    assert model.feature_head.out_features == 384  # the student's 192 to the teacher's width
    path = tmp_path / 'distilled.pth'
    torch.save({'state_dict': model.state_dict()}, path)  # as mmengine's checkpoints hold it
    dense = BACKBONES['MoRViT'](arch='tiny', img_size=32, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    dense.init_weights()  # strict: backbone.* loaded, the final norm and the projection head dropped
    for k, v in dense.state_dict().items():
        assert torch.equal(v, model.backbone.state_dict()[k]), k


def test_bad_teachers_and_starts_are_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"closest: \['deit_small_patch16_224.fb_in1k'"):
        timm_teacher('deit_smal_patch16_224', checkpoint='x.pth')
    missing = str(tmp_path / 'mae.pth')
    with pytest.raises(
        FileNotFoundError, match=f'make it with: wget https://dl.fbaipublicfiles.com/mae/.* -O {missing}'
    ):
        timm_teacher('vit_base_patch16_224.mae', checkpoint=missing)
    with pytest.raises(ValueError, match='not both'):
        timm_teacher('vit_tiny_patch16_224', checkpoint=missing, stand_in_seed=0)
    backbone = dict(type='ReViT', arch='tiny', final_norm=True, init_cfg=dict(type='Pretrained', checkpoint=missing))
    with pytest.raises(ValueError, match='pass one start'):
        distiller(backbone)
    with pytest.raises(ValueError, match='final_norm=True'):
        distiller(dict(type='ReViT', arch='tiny'))


DISTILL = sorted(glob.glob(osp.join(REPO, 'configs', 'distill', '*.py')))


@pytest.mark.parametrize('path', DISTILL, ids=osp.basename)
def test_every_distillation_recipe_names_a_timm_teacher_and_its_methods_deit_start(path):
    cfg = cached_config(path)
    assert cfg.model.type == 'FeatureDistiller' and cfg.model.backbone.final_norm
    assert 'mmrecvit.mm.feature_distill' in cfg.custom_imports.imports
    assert cfg.train_dataloader.dataset.with_label is False  # no labels: any image folder
    if '_toy' in path:  # the stand-in init_distance measures against; the student starts from it
        assert cfg.model.teacher == dict(name='vit_small_patch16_224', stand_in_seed=0)
        assert cfg.model.init_from_teacher and cfg.model.backbone.init_cfg is None
    else:
        assert cfg.model.teacher.name == 'deit_small_patch16_224.fb_in1k'
        assert cfg.model.backbone.init_cfg.checkpoint == cfg.model.teacher.checkpoint  # the DeiT start
