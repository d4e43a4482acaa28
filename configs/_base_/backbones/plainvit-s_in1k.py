# PlainViT-S from its own ImageNet-1k checkpoint, for the equal-budget family (docs/comparison.md): every method, this
# plain ViT included, from the same pretraining recipe and budget, configs/cls/<method>-small_4xb256_in1k.py (DeiT's
# recipe, 300 epochs from scratch), rather than DeiT's released weights (its paper's start: plainvit-s_deit.py).
_base_ = './plainvit-s.py'
backbone = dict(
    init_cfg=dict(
        type='Pretrained',
        checkpoint='checkpoints/plainvit-small_in1k.pth',
        made_by='python tools/train.py configs/cls/plainvit-small_4xb256_in1k.py --work-dir work_dirs/plainvit-small_in1k'
        ' && cp $(cat work_dirs/plainvit-small_in1k/last_checkpoint) checkpoints/plainvit-small_in1k.pth',
    )
)
backbone_recipe = dict(
    differs={
        'paper_start': (
            'configs/cls/plainvit-small_4xb256_in1k.py',
            "the equal-budget family: DeiT's recipe run here, as for every method (docs/comparison.md)",
        ),
        'start.checkpoint': ('plainvit-small_in1k.pth', 'its own ImageNet-1k classifier (the equal-budget family)'),
        'start.made_by': ('configs/cls/plainvit-small_4xb256_in1k.py', "DeiT's recipe, run here"),
    },
    intended={'model.backbone.init_cfg.*': 'its own ImageNet-1k checkpoint (the equal-budget family)'},
)
