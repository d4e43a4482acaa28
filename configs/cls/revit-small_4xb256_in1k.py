# reViT (docs/methods/revit.md): one shared DeiT-S block applied 12 times with 4 depth-programmed expert FFNs; its router
# starts uniform (zero output layer, the from-scratch init). The paper trains with DeiT III's recipe (BCE
# loss, lr 4e-3 at batch 2048) for 78.2 % (S/16, E=4); here every method shares DeiT's recipe.
_base_ = ['./_base_/recvit-small_4xb256_in1k.py', '../_base_/backbones/revit-s.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
