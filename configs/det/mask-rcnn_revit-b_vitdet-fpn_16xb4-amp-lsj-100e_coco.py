# reViT-B, ViTDet's COCO recipe (LSJ 1024, 100 epochs) at ViT-B width: the first _base_.
# The backbone, from its own ImageNet-1k checkpoint, is the second (configs/_base_/backbones/revit-b_in1k.py: the method,
# its start and its knobs), as in every recipe of it.
_base_ = ['./_base_/mask-rcnn_vit-b_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../_base_/backbones/revit-b_in1k.py']
model = dict(backbone=_base_.backbone)
recipe = dict(_base_.backbone_recipe, measured=dict(gflops=936.2, params=22.0, train_gflops=3503.3))
