# ViTDet's COCO recipe (./mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py) at ViT-B width, from DeiT-B: ViTDet-B's
# drop path 0.1 and layer decay 0.7 are the S recipe's already. The width is set once, `embed_dim`; the neck's widths
# are restated from it (mmengine computed the base's from the base's embed_dim, 384).
_base_ = ['./mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../../_base_/widths.py']
embed_dim, model, recipe = _base_.pop('widths').det(_base_.model, 'b')
