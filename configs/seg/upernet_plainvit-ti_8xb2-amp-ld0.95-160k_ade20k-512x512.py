# PlainViT-Ti from DeiT-Ti, ViT-Adapter's ADE20K UperNet recipe at ViT-Ti width: the iso-parameter reference of the
# shared-weight methods in the references family (docs/comparison.md). The first _base_: the recipe at Ti width; the
# second: the backbone (configs/_base_/backbones/plainvit-ti_deit.py).
# `recipe`: its differences from PlainViT-S's recipe for the references family (its backbone file's `references`;
# docs/comparison.md: in its width's family it is the reference itself); what the card measures of it:
# configs/measured.yml.
_base_ = ['./_base_/upernet_vit-ti_8xb2-amp-ld0.95-160k_ade20k-512x512.py', '../_base_/backbones/plainvit-ti_deit.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.pop('references')['seg']
