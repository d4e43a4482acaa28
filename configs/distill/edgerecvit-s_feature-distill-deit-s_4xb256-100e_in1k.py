# Edge-RecViT-S feature-distilled from DeiT-S, without labels (the _base_'s recipe: a DeiT-imitation control, at the
# layers its pyramid reads), the student starting at its method's DeiT start (configs/_base_/backbones/edgerecvit-s_deit.py).
_base_ = ['./_base_/feature-distill_4xb256-100e_in1k.py', '../_base_/backbones/edgerecvit-s_deit.py']
custom_hooks = [*_base_.custom_hooks, _base_.temperature_schedule]  # Edge-RecViT's tau annealed
model = dict(backbone=_base_.backbone)
