# Baseline: plain DeiT-S ViT, 12 distinct blocks (depth 12 from the base's arch='small'); outputs after
# blocks 3/6/9/12 (the default out_indices).
_base_ = './_base_/mask-rcnn_vit_fpn_1x_coco.py'
model = dict(backbone=dict(type='PlainViT'))  # from DeiT: block i <- DeiT block i (no choice to make)
