# reViT-S's own distilled start, the stronger-teacher variant (its paper's distillation: an E=8 reViT-B/14 trained from
# scratch on DINOv2-B/14's final features alone keeps nearly the teacher's linear-probe accuracy; docs/pretraining.md):
# the student from scratch, DINOv2-B/14 (timm's `vit_base_patch14_dinov2.lvd142m`) as the teacher, its final
# normalised tokens (layers='final'), on ImageNet-1k images at 224 (the teacher's 16x16 grid resampled to the
# student's 14x14). Decisions: our patch 16 and E=4 (the dense recipes' reViT), 100 epochs (the paper's schedule is
# not in our notes). A missing teacher file is an error with the command that fetches it.
_base_ = ['./_base_/feature-distill_4xb256-100e_in1k.py', '../_base_/backbones/revit-s.py']
model = dict(
    backbone=dict(_base_.backbone, arch='small', drop_path_rate=0.0, init_cfg=None),  # step dropout is its depth noise
    teacher=dict(
        name='vit_base_patch14_dinov2.lvd142m', checkpoint='checkpoints/vit_base_patch14_dinov2.lvd142m.safetensors'
    ),
    layers='final',
)
