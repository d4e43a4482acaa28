# Toy (CPU) twin of mask-rcnn_morvit-s_fpn_1x_coco.py (the same method at toy size):
# ViT-Ti first block, shared x4, last (depth 6); with timm_init='pick' the shared block comes from checkpoint block 2.
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(
    backbone=dict(type='MoRViT', depth=6, shared_init_block=2, timm_init='average', timm_gates='open', router_alpha=1.0)
)
