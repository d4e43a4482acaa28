# reViT (docs/methods/revit.md): one shared DeiT-S block applied 12 times with 4 depth-programmed expert FFNs; its router
# starts uniform (zero output layer, the from-scratch init). The paper trains with DeiT III's recipe (BCE
# loss, lr 4e-3 at batch 2048) for 78.2 % (S/16, E=4); here every method shares DeiT's recipe. Its regulariser of depth
# is its per-image step dropout (0.3, the class default), which is the paper's stochastic depth: drop path is off
# (DeiT's 0.1 on top would drop twice).
_base_ = ['./_base_/recvit-small_4xb256_in1k.py', '../_base_/backbones/revit-s.py']
model = dict(backbone=dict(_base_.backbone, drop_path_rate=0.0))
recipe = dict(
    _base_.backbone_recipe,
    intended={
        **_base_.backbone_recipe.intended,
        'model.backbone.drop_path_rate': "reViT's step dropout (0.3) is its stochastic depth: no drop path on top",
    },
)
