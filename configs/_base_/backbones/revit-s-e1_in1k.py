# reViT-S's own ablation (its paper's E=1: one tied block, no expert bank), from its own ImageNet-1k classifier
# trained the same way (configs/cls/revit-small_one-expert_4xb256_in1k.py): the ablation family
# (docs/comparison.md).
_base_ = './revit-s_in1k.py'
backbone = dict(
    num_experts=1,
    init_cfg=dict(
        checkpoint='checkpoints/revit-small_one-expert_in1k.pth',
        made_by='python tools/train.py configs/cls/revit-small_one-expert_4xb256_in1k.py --work-dir work_dirs/revit-small_one-expert_in1k'
        ' && cp $(cat work_dirs/revit-small_one-expert_in1k/last_checkpoint) checkpoints/revit-small_one-expert_in1k.pth',
    ),
)
backbone_recipe = dict(
    paper_start='configs/cls/revit-small_one-expert_4xb256_in1k.py',  # as its paper runs the ablation: trained on ImageNet-1k the same way
    differs={
        'model.backbone.num_experts': (
            1,
            "the paper's ablation: one expert, the purely tied block (70.6 % vs 78.2 % at S/16)",
        ),
        'start.checkpoint': (
            'revit-small_one-expert_in1k.pth',
            'its own ImageNet-1k classifier, trained as the ablation',
        ),
        'start.made_by': ('configs/cls/revit-small_one-expert_4xb256_in1k.py', 'the ablation trained as the method is'),
    },
    intended={
        'model.backbone.num_experts': 'the ablation (above)',
    },
)
