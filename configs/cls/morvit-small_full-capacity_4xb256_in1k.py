# MoR-ViT's own ablation (the recursion without routing: every token through every recursion):
# morvit-small_4xb256_in1k.py at full capacity, trained the same way; the start of its dense ablation recipes
# (configs/_base_/backbones/morvit-s-full_in1k.py).
_base_ = './morvit-small_4xb256_in1k.py'
model = dict(backbone=dict(capacities=[1.0] * 10))
recipe = dict(intended={'model.backbone.capacities': 'the ablation: full capacity, every token in every recursion'})
