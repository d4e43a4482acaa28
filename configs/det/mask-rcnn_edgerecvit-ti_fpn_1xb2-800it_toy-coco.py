# Toy (CPU) variant of mask-rcnn_edgerecvit-s_fpn_1x_coco.py: ViT-Ti head + shared x4 + tail (L=6).
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(backbone=dict(type='EdgeRecViT', arch='tiny', depth=6, shared_init_block=3, out_indices=(0, 2, 3, 5)))
