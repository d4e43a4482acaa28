# MoR-ViT-S's own ablation (recursion without routing: every token through every recursion, full capacity),
# from its own ImageNet-1k classifier trained the same way (configs/cls/morvit-small_full-capacity_4xb256_in1k.py):
# the ablation family (docs/comparison.md).
_base_ = './morvit-s_in1k.py'
backbone = dict(
    capacities=[1.0] * 10,
    init_cfg=dict(
        checkpoint='checkpoints/morvit-small_full-capacity_in1k.pth',
        made_by='python tools/train.py configs/cls/morvit-small_full-capacity_4xb256_in1k.py --work-dir work_dirs/morvit-small_full-capacity_in1k'
        ' && cp $(cat work_dirs/morvit-small_full-capacity_in1k/last_checkpoint) checkpoints/morvit-small_full-capacity_in1k.pth',
    ),
)
backbone_recipe = dict(
    paper_start='configs/cls/morvit-small_full-capacity_4xb256_in1k.py',  # as its paper runs the ablation: trained on ImageNet-1k the same way
    differs={
        'eval_knobs': (
            'capacity_schedule 1, 1, 1, 1, 1, 1, 1, 1, 1, 1',
            'the ablation: full capacity, every token in every recursion',
        ),
        'start.checkpoint': (
            'morvit-small_full-capacity_in1k.pth',
            'its own ImageNet-1k classifier, trained as the ablation',
        ),
        'start.made_by': (
            'configs/cls/morvit-small_full-capacity_4xb256_in1k.py',
            'the ablation trained as the method is',
        ),
    },
    intended={
        'model.backbone.capacities': 'the ablation (above)',
    },
)
