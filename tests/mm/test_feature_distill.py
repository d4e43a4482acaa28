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


def distiller(backbone, init_from_teacher=True, teacher=TEACHER, layers='final'):
    from mmpretrain.registry import MODELS

    cfg = dict(
        type='FeatureDistiller', backbone=backbone, teacher=teacher, init_from_teacher=init_from_teacher, layers=layers
    )
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


def test_the_pyramid_objective_matches_the_layers_the_pyramid_reads_at_their_relative_depth():
    """Issue 45: layers='pyramid' matches the student's out_indices to the teacher's layers at the same relative depth;
    a student that is the teacher starts at zero loss, as does SR-ViT's function start (a DeiT-imitation control is
    no start for it), a method that cannot represent it does not; a wider teacher gets one projection per layer."""
    plain = distiller(dict(type='PlainViT', arch='tiny', final_norm=True, img_size=32), layers='pyramid').train()
    assert plain.student_layers == plain.teacher_layers == (2, 5, 8, 11)
    x = torch.randn(2, 3, 32, 32)
    assert plain(x, mode='loss')['loss_distill_feature'].item() < 1e-10
    plain.backbone.blocks[1].mlp.fc1.weight.data.add_(0.1)  # an early layer away from the teacher: every level moves
    loss = plain(x, mode='loss')['loss_distill_feature']
    loss.backward()
    assert loss.item() > 0 and plain.backbone.blocks[1].mlp.fc1.weight.grad.abs().sum() > 0
    srvit = distiller(dict(type='SRViT', arch='tiny', final_norm=True, img_size=32), layers='pyramid')
    revit = distiller(dict(type='ReViT', arch='tiny', depth=6, final_norm=True, img_size=32), layers='pyramid')
    assert srvit.teacher_layers == (3, 7, 9, 11) and revit.teacher_layers == (1, 5, 7, 11)  # (0, 2, 3, 5) of 6
    srvit_loss, revit_loss = (m(x, mode='loss')['loss_distill_feature'].item() for m in (srvit, revit))
    assert srvit_loss < 1e-2 * revit_loss
    wide = dict(name='vit_small_patch16_224', stand_in_seed=0)
    model = distiller(dict(type='MoRViT', arch='tiny', final_norm=True, img_size=32), False, wide, 'pyramid')
    assert [h.out_features for h in model.feature_head] == [384] * 4
    assert torch.isfinite(model(x, mode='loss')['loss_distill_feature'])
    with pytest.raises(ValueError, match='FeatureDistiller layers'):
        distiller(dict(type='PlainViT', arch='tiny', final_norm=True, img_size=32), layers='all')


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
def test_every_distillation_recipe_names_a_timm_teacher_and_its_start(path):
    """A DeiT-imitation control (issue 45.6): the student from its method's DeiT start at its width, DeiT's layers its
    pyramid reads; reViT's own start: from scratch to DINOv2-B/14's final features."""
    cfg = cached_config(path)
    assert cfg.model.type == 'FeatureDistiller' and cfg.model.backbone.final_norm
    assert 'mmrecvit.mm.feature_distill' in cfg.custom_imports.imports
    assert cfg.train_dataloader.dataset.with_label is False  # no labels: any image folder
    if '_toy' in path:  # the stand-in init_distance measures against; the student starts from it
        assert cfg.model.teacher == dict(name='vit_small_patch16_224', stand_in_seed=0)
        assert cfg.model.init_from_teacher and cfg.model.backbone.init_cfg is None
    elif '-dinov2-' in path:
        assert cfg.model.teacher.name == 'vit_base_patch14_dinov2.lvd142m' and cfg.model.layers == 'final'
        assert cfg.model.backbone.type == 'ReViT' and cfg.model.backbone.init_cfg is None
    else:
        width = cfg.model.backbone.get('arch', 'small')
        assert cfg.model.teacher.name == f'deit_{width}_patch16_224.fb_in1k' and cfg.model.layers == 'pyramid'
        assert cfg.model.backbone.init_cfg.checkpoint == cfg.model.teacher.checkpoint  # the DeiT start
        assert cfg.model.backbone.init_cfg.purpose == 'distillation'  # on purpose: no start warning
