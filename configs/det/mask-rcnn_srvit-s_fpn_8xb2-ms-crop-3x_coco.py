# SR-ViT-S, ViT-Adapter's 3x COCO recipe: the first _base_.
# The backbone, from its own ImageNet-1k checkpoint, is the second (configs/_base_/backbones/srvit-s_in1k.py: the method,
# its start and its knobs), as in every recipe of it.
_base_ = ['./_base_/mask-rcnn_vit_fpn_8xb2-ms-crop-3x_coco.py', '../_base_/backbones/srvit-s_in1k.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe  # the backbone's differences from the anchor's and the other methods'
