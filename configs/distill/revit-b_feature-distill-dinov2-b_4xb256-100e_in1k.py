# reViT-B's own distilled start, the stronger-teacher variant (its paper's distillation): revit-s_feature-distill-dinov2-
# b_4xb256-100e_in1k.py (the student from scratch, DINOv2-B/14's final normalised tokens; docs/pretraining.md) with the
# student at ViT-B width.
_base_ = './revit-s_feature-distill-dinov2-b_4xb256-100e_in1k.py'
model = dict(backbone=dict(arch='base'))
