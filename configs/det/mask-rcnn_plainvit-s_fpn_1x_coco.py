# Baseline: plain DeiT-S ViT (12 distinct blocks), outputs after blocks 3/6/9/12.
_base_ = './_base_/mask-rcnn_vit_fpn_1x_coco.py'
model = dict(backbone=dict(type='PlainViT', arch='small', out_indices=(2, 5, 8, 11)))
