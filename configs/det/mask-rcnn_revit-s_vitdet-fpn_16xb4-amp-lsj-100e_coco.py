# reViT-S, ViTDet's COCO recipe (LSJ 1024, 100 epochs): the first _base_.
# The backbone, from its own ImageNet-1k checkpoint, is the second (configs/_base_/backbones/revit-s_in1k.py: the method,
# its start and its knobs), as in every recipe of it.
_base_ = ['./_base_/mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../_base_/backbones/revit-s_in1k.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
