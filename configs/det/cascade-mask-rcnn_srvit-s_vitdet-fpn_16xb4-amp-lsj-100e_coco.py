# SR-ViT-S, Cascade Mask R-CNN on ViTDet's COCO recipe: the first _base_.
# The backbone, from its own ImageNet-1k checkpoint, is the second (configs/_base_/backbones/srvit-s_in1k.py: the method,
# its start and its knobs), as in every recipe of it.
_base_ = ['./_base_/cascade-mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../_base_/backbones/srvit-s_in1k.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe  # the backbone's differences from the anchor's and the other methods'
