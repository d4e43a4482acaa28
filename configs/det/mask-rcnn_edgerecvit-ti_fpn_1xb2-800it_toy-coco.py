# Toy (CPU) twin of mask-rcnn_edgerecvit-s_fpn_1x_coco.py: the same method at the toy size
# (configs/_base_/backbones/edgerecvit-toy.py), on the toy recipe (the first _base_).
_base_ = ['./_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py', '../_base_/backbones/edgerecvit-toy.py']
custom_hooks = [*_base_.custom_hooks, _base_.temperature_schedule]  # Edge-RecViT's tau annealed
model = dict(backbone=_base_.backbone)
