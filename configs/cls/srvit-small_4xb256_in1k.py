# SR-ViT (SoftMoR, docs/methods/srvit.md): DeiT-S blocks in units [4, 4, 2, 2], each run T=4 steps and mixed per token;
# the CLS token of the last unit's mixture is classified. Paper: 82.48 % top-1 (T=4) vs 79.83 % (T=1).
_base_ = ['./_base_/recvit-small_4xb256_in1k.py', '../_base_/backbones/srvit-s.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
