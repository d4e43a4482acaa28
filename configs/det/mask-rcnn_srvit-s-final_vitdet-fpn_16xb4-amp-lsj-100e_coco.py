# SR-ViT-S's own ablation (final readout), in the ablation family (docs/comparison.md).
# ViTDet's COCO recipe (LSJ 1024, 100 epochs): the first _base_; the backbone: configs/_base_/backbones/srvit-s-final_in1k.py.
_base_ = ['./_base_/mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../_base_/backbones/srvit-s-final_in1k.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
