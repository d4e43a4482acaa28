# Baseline: naive recursion (docs/methods/baselines.md) - 3 unique DeiT-S blocks applied cyclically for 12 steps, the final
# state's CLS token classified.
_base_ = ['./_base_/recvit-small_4xb256_in1k.py', '../_base_/backbones/naiverecvit-s.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
