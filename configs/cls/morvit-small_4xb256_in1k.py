# MoR-ViT (docs/methods/mor_vit.md): DeiT-S first block, one shared block cycled 10 times with expert-choice routing
# (capacities (N_r - r)/N_r, gate scale alpha = 0.1 as MoR's from-scratch recipe), last block.
# Token-choice routing: model.backbone.routing=token_choice
_base_ = ['./_base_/recvit-small_4xb256_in1k.py', '../_base_/backbones/morvit-s.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
