# PlainViT-B, ViTDet's COCO recipe (LSJ 1024, 100 epochs) at ViT-B width: the first _base_.
# The backbone, from DeiT-B, is the second (configs/_base_/backbones/plainvit-b_deit.py: the method,
# its start and its knobs), as in every recipe of it.
# `recipe`: its differences from PlainViT-S's recipe for the references family (its backbone file's `references`;
# docs/comparison.md: in its width's family it is the reference itself); what the card measures of it:
# configs/measured.yml.
_base_ = ['./_base_/mask-rcnn_vit-b_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../_base_/backbones/plainvit-b_deit.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.pop('references')['det']
