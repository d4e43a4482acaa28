# Toy (CPU) twin of mask-rcnn_morvit-s_fpn_1x_coco.py (the same method at toy size):
# ViT-Ti first block, shared x4, last (depth 6); from a checkpoint (timm_init='average') the shared block starts
# as the mean of the layers it replaces.
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(backbone=dict(type='MoRViT', depth=6, timm_init='average', timm_gates='open', router_alpha=1.0))
