# MoR-ViT-S as the COCO / ADE20K recipes use it: morvit-s.py, started where its paper starts, from its own ImageNet-1k
# checkpoint: configs/cls/morvit-small_4xb256_in1k.py, from scratch, 300 epochs (its paper: 200 epochs from scratch).
# The classifier's checkpoint is the start as it is (the backbone loads its backbone.* strictly, the head is dropped);
# `made_by` is the command that makes it, said if the file is missing. The cheaper fair start, a feature-distilled
# one: configs/distill/ (docs/pretraining.md). router_alpha: the class default 0.1, as the checkpoint was trained
# (MoR's from-scratch gates), not the DeiT start's 1.0 (morvit-s_deit.py).
_base_ = ['./morvit-s.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained('morvit-small_4xb256_in1k', "from scratch, DeiT's recipe")
