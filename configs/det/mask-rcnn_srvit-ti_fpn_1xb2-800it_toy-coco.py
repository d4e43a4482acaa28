# Toy (CPU) twin of mask-rcnn_srvit-s_fpn_1x_coco.py (the same method at toy size):
# 6 ViT-Ti blocks in units [2, 2, 1, 1], T=4 (24 applications).
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(backbone=dict(type='SRViT', depth=6, unit_sizes=(2, 2, 1, 1), num_recursions=4, timm_init='function'))
