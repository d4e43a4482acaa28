# PlainViT-S, ViT-Adapter's ADE20K UperNet recipe: the first _base_.
# The backbone, from DeiT-S, is the second (configs/_base_/backbones/plainvit-s_deit.py: the method,
# its start and its knobs), as in every recipe of it.
_base_ = ['./_base_/upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py', '../_base_/backbones/plainvit-s_deit.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe  # the backbone's differences from the anchor's and the other methods'
