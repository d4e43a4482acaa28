# PlainViT (baseline), Cascade Mask R-CNN on ViTDet's COCO recipe: the _base_ below.
# The backbone is the method's in every recipe (mask-rcnn_plainvit-s_fpn_1x_coco.py describes it and its knobs).
_base_ = './_base_/cascade-mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py'
model = dict(backbone=dict(type='PlainViT'))  # from DeiT: block i <- DeiT block i (no choice to make)
