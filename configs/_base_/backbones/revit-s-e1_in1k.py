# reViT-S's own ablation (its paper's E=1: one tied block, no expert bank), from its own ImageNet-1k classifier
# trained the same way (configs/cls/revit-small_one-expert_4xb256_in1k.py): the ablation family
# (docs/comparison.md).
_base_ = ['./revit-s_in1k.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').ablation(
    'revit-small_one-expert_4xb256_in1k',
    {
        'model.backbone.num_experts': (
            1,
            "the paper's ablation: one expert, the purely tied block (70.6 % vs 78.2 % at S/16)",
        )
    },
    num_experts=1,
)
