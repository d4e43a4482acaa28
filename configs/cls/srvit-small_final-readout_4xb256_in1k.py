# SR-ViT's own ablation (its paper: naive recursion, the final state read out, degrades as T grows): srvit-small_4xb256_in1k.py
# with readout='final', trained the same way; the start of its dense ablation recipes
# (configs/_base_/backbones/srvit-s-final_in1k.py).
_base_ = './srvit-small_4xb256_in1k.py'
model = dict(backbone=dict(readout='final'))
