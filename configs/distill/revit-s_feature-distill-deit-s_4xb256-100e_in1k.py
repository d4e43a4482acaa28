# reViT-S feature-distilled from DeiT-S, without labels (the _base_'s recipe: a DeiT-imitation control, at the
# layers its pyramid reads), the student starting at its method's DeiT start (configs/_base_/backbones/revit-s_deit.py).
_base_ = ['./_base_/feature-distill_4xb256-100e_in1k.py', '../_base_/backbones/revit-s_deit.py']
model = dict(backbone=_base_.backbone)
