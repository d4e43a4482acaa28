# MoR-ViT-S's own ablation (full capacity), in the ablation family (docs/comparison.md).
# ViTDet's COCO recipe (LSJ 1024, 100 epochs): the first _base_; the backbone: configs/_base_/backbones/morvit-s-full_in1k.py.
_base_ = ['./_base_/mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../_base_/backbones/morvit-s-full_in1k.py']
model = dict(backbone=_base_.backbone)
recipe = dict(
    _base_.backbone_recipe,  # the backbone's differences from the anchor's and the other methods'
    # what the card measures at this recipe's sizes (tools/analysis_tools/compare.py; --suggest prints them)
    measured=dict(params=5.71, train_gflops=1112.9),
)
