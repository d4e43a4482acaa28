# Toy (CPU) variant of mask-rcnn_plainvit-s_fpn_1x_coco.py: a 6-block ViT-Ti.
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(backbone=dict(type='PlainViT', arch='tiny', depth=6, out_indices=(0, 2, 3, 5)))
