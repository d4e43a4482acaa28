# Baseline: plain DeiT-S ViT (12 distinct blocks), DeiT's ImageNet recipe.
_base_ = ['./_base_/recvit-small_4xb256_in1k.py', '../_base_/backbones/plainvit-s.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
