# PlainViT (baseline), ViT-Adapter's 3x COCO recipe: the _base_ below.
# The backbone is the method's in every recipe (mask-rcnn_plainvit-s_fpn_1x_coco.py describes it and its knobs).
_base_ = './_base_/mask-rcnn_vit_fpn_8xb2-ms-crop-3x_coco.py'
model = dict(backbone=dict(type='PlainViT'))  # from DeiT: block i <- DeiT block i (no choice to make)
