# Toy (CPU) variant of mask-rcnn_morvit-s_fpn_1x_coco.py: ViT-Ti first block, shared x4, last (6 steps).
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(backbone=dict(_delete_=True, type='MoRViT', arch='tiny', num_recursions=4, routing='expert_choice',
                           shared_init_block=2, out_indices=(0, 2, 3, 5)))
