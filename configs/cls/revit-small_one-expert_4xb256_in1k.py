# reViT's own ablation (its paper's E=1, the purely tied block: 70.6 % vs 78.2 % at S/16): revit-small_4xb256_in1k.py
# with one expert, trained the same way; the start of its dense ablation recipes
# (configs/_base_/backbones/revit-s-e1_in1k.py).
_base_ = './revit-small_4xb256_in1k.py'
model = dict(backbone=dict(num_experts=1))
