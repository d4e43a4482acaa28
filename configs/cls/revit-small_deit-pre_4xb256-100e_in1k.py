# reViT fine-tuned from DeiT-S. Init shared_init='average', router_init='programmed' (the defaults): shared
# attention and norms <- the mean of DeiT's blocks, expert e <- the mean FFN of the e-th of 4 groups of
# blocks, and the router programmed so that step t selects the expert of its own depth group (docs/methods/revit.md): the
# closest start to DeiT one shared attention allows.
_base_ = ['./_base_/recvit-small_deit-pre_4xb256-100e_in1k.py', '../_base_/backbones/revit-s_deit.py']
# the paper's elastic-depth training (step dropout 0.3, the class default; the dense recipes fix the depth), which is its
# stochastic depth: no drop path on top (as revit-small_4xb256_in1k.py)
model = dict(backbone=dict(_base_.backbone, step_drop_rate=0.3, drop_path_rate=0.0))
recipe = dict(
    _base_.backbone_recipe,
    intended={
        **_base_.backbone_recipe.intended,
        'model.backbone.drop_path_rate': "reViT's step dropout (0.3) is its stochastic depth: no drop path on top",
    },
)
