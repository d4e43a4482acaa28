# reViT-S, ViT-Adapter's ADE20K UperNet recipe: the first _base_.
# The backbone, from its own ImageNet-1k checkpoint, is the second (configs/_base_/backbones/revit-s_in1k.py: the method,
# its start and its knobs), as in every recipe of it.
_base_ = ['./_base_/upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py', '../_base_/backbones/revit-s_in1k.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
