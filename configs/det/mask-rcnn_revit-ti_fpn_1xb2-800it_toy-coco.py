# Toy (CPU) twin of mask-rcnn_revit-s_fpn_1x_coco.py: the same method at the toy size
# (configs/_base_/backbones/revit-toy.py), on the toy recipe (the first _base_).
_base_ = ['./_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py', '../_base_/backbones/revit-toy.py']
model = dict(backbone=_base_.backbone)
