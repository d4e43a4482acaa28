# Edge-RecViT-S's own ablation (full depth, the ranker deciding nothing), in the ablation family (docs/comparison.md).
# ViTDet's COCO recipe (LSJ 1024, 100 epochs): the first _base_; the backbone: configs/_base_/backbones/edgerecvit-s-full_in1k.py.
_base_ = [
    './_base_/mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py',
    '../_base_/backbones/edgerecvit-s-full_in1k.py',
]
custom_hooks = [*_base_.custom_hooks, _base_.temperature_schedule]  # Edge-RecViT's tau (its start's, held)
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
