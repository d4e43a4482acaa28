# ViTDet's COCO recipe (./mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py) at ViT-Ti width (192 wide, 3 heads, 12
# layers), from DeiT-Ti: the iso-parameter reference of the shared-weight methods (docs/comparison.md). ViTDet's drop
# path 0.1 and layer decay 0.7 as for S. The width is set once, `embed_dim`; the neck's widths are restated from it.
_base_ = ['./mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../../_base_/widths.py']
embed_dim, model, recipe = _base_.pop('widths').det(_base_.model, 'ti')
