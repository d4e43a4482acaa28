# SR-ViT-S from DeiT-S as DeiT's function: a CONTROL beside its paper-faithful recipe
# (mask-rcnn_srvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py, from its own ImageNet-1k classifier). Its routers start on
# recursion 1 and its step transforms at zero, so its recursions start dormant; the start warning says so.
_base_ = ['./_base_/mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../_base_/backbones/srvit-s_deit.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe  # the backbone's differences from the anchor's and the other methods'
