# Toy (CPU) twin of mask-rcnn_plainvit-s_fpn_1x_coco.py (the same method at toy size):
# A 6-block ViT-Ti.
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(backbone=dict(type='PlainViT', depth=6))
