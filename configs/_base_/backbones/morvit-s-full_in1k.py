# MoR-ViT-S's own ablation (recursion without routing: every token through every recursion, full capacity),
# from its own ImageNet-1k classifier trained the same way (configs/cls/morvit-small_full-capacity_4xb256_in1k.py):
# the ablation family (docs/comparison.md).
_base_ = ['./morvit-s_in1k.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').ablation(
    'morvit-small_full-capacity_4xb256_in1k',
    {
        'eval_knobs': (
            'capacity_schedule 1, 1, 1, 1, 1, 1, 1, 1, 1, 1',
            'the ablation: full capacity, every token in every recursion',
        )
    },
    capacities=[1.0] * 10,
)
