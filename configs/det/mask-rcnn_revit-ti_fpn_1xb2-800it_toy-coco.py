# Toy (CPU) twin of mask-rcnn_revit-s_fpn_1x_coco.py (the same method at toy size):
# One ViT-Ti block applied 6 times, 4 experts.
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(
    backbone=dict(
        type='ReViT', depth=6, num_experts=4, step_drop_rate=0.0, timm_init='average', timm_gates='programmed'
    )
)
