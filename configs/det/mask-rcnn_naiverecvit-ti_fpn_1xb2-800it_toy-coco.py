# Toy (CPU) variant of mask-rcnn_naiverecvit-s_fpn_1x_coco.py: 2 unique ViT-Ti blocks, 6 steps.
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(backbone=dict(type='NaiveRecursiveViT', arch='tiny', depth=6, num_blocks=2,
                           out_indices=(0, 2, 3, 5)))
