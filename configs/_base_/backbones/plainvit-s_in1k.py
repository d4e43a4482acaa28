# PlainViT-S from its own ImageNet-1k checkpoint, for the equal-budget family (docs/comparison.md): every method, this
# plain ViT included, from the same pretraining recipe and budget, configs/cls/<method>-small_4xb256_in1k.py (DeiT's
# recipe, 300 epochs from scratch), rather than DeiT's released weights (its paper's start: plainvit-s_deit.py).
_base_ = ['./plainvit-s.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained(
    'plainvit-small_4xb256_in1k',
    "DeiT's recipe, run here",
    intended={'model.backbone.init_cfg.*': 'its own ImageNet-1k checkpoint (the equal-budget family)'},
    why='its own ImageNet-1k classifier (the equal-budget family)',
    elsewhere="the equal-budget family: DeiT's recipe run here, as for every method (docs/comparison.md)",
)
