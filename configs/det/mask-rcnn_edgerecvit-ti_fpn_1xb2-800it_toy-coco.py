# Toy (CPU) twin of mask-rcnn_edgerecvit-s_fpn_1x_coco.py (the same method at toy size):
# ViT-Ti head + shared x4 + tail (depth 6); the shared block is initialised from checkpoint block 3.
_base_ = './_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py'
model = dict(backbone=dict(type='EdgeRecViT', depth=6, shared_init_block=3, final_norm=True))
