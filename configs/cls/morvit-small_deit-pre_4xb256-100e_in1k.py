# MoR-ViT fine-tuned from DeiT-S. Init shared_init='average' (the shared block <- the mean of the 10 tied DeiT
# blocks, first/last <- blocks 0/11) with router_init='open' (the default: every gate starts at 0.99) and
# router_alpha=1.0: MoR's from-scratch alpha = 0.1 caps every gate at 0.1, which no DeiT start survives;
# with alpha 1 a chosen token gets (nearly) the whole block, DeiT's update (docs/methods/mor_vit.md).
_base_ = ['./_base_/recvit-small_deit-pre_4xb256-100e_in1k.py', '../_base_/backbones/morvit-s_deit.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
