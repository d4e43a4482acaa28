# SR-ViT fine-tuned from DeiT-S. Init router_init='function' (the default): block i <- DeiT block i, step
# transforms zero and every router biased to step 1, so the T=4 model starts as DeiT's function (docs/methods/srvit.md).
_base_ = ['./_base_/recvit-small_deit-pre_4xb256-100e_in1k.py', '../_base_/backbones/srvit-s_deit.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
