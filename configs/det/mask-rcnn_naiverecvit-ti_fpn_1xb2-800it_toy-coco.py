# Toy (CPU) twin of mask-rcnn_naiverecvit-s_fpn_1x_coco.py (the same method at toy size):
# 2 unique ViT-Ti blocks applied for 6 steps.
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(backbone=dict(type='NaiveRecursiveViT', depth=6, num_blocks=2, timm_init='cycle'))
