# Toy (CPU) variant of mask-rcnn_srvit-s_fpn_1x_coco.py: 6 ViT-Ti blocks in units [2, 2, 1, 1], T=4.
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(backbone=dict(_delete_=True, type='SRViT', arch='tiny', num_blocks=6, unit_sizes=(2, 2, 1, 1), num_recursions=4, readout='soft'))
