# Toy (CPU) twin of edgerecvit-small_4xb256_in1k.py: the same method at the toy size
# (configs/_base_/backbones/edgerecvit-toy.py), on the toy classification recipe (the first _base_).
_base_ = ['./_base_/recvit-ti_1xb32-200it_toy-cls.py', '../_base_/backbones/edgerecvit-toy.py']
custom_hooks = [*_base_.custom_hooks, _base_.temperature_schedule]  # Edge-RecViT's tau annealed
# CCE (paper 002, docs/methods/edge_recvit.md): the logits scaled by the mean confidence of the ranker's depth
# decisions, its main training signal in classification (mmrecvit/mm/cce.py).
custom_imports = dict(imports=['mmrecvit.mm', 'mmrecvit.mm.cce'], allow_failed_imports=False)
model = dict(type='ConfidenceScaledClassifier', backbone=_base_.backbone)
