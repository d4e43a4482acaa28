# Baseline: plain DeiT-S ViT (12 distinct blocks), DeiT's ImageNet recipe.
_base_ = './_base_/recvit-small_4xb256_in1k.py'
model = dict(backbone=dict(type='PlainViT', arch='small'))
