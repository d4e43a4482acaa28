# PlainViT fine-tuned from DeiT-S: block i <- DeiT block i, so it starts as DeiT exactly (the reference).
_base_ = ['./_base_/recvit-small_deit-pre_4xb256-100e_in1k.py', '../_base_/backbones/plainvit-s_deit.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
