# A DeiT-imitation CONTROL start for the COCO / ADE20K recipes (docs/pretraining.md): reViT-S feature-distilled
# from DeiT-S at the layers its pyramid reads (configs/distill/revit-s_feature-distill-deit-s_4xb256-100e_in1k.py), from its DeiT start: it can
# bring the method towards PlainViT's start and no further. Not its paper's start (revit-s_in1k.py): name this file
# instead as a recipe's second _base_ for the control.
_base_ = './revit-s_deit.py'
backbone = dict(
    init_cfg=dict(
        type='Pretrained',
        checkpoint='checkpoints/revit-small_distill-deit-s.pth',
        made_by='python tools/train.py configs/distill/revit-s_feature-distill-deit-s_4xb256-100e_in1k.py'
        ' --work-dir work_dirs/revit-small_distill-deit-s'
        ' && cp $(cat work_dirs/revit-small_distill-deit-s/last_checkpoint) checkpoints/revit-small_distill-deit-s.pth',
    ),
)
backbone_recipe = dict(
    differs={
        'paper_start': (
            'configs/distill/revit-s_feature-distill-deit-s_4xb256-100e_in1k.py',
            'a DeiT-imitation control (docs/pretraining.md)',
        ),
        'start.checkpoint': (
            'revit-small_distill-deit-s.pth',
            'feature-distilled from DeiT-S: a DeiT-imitation control',
        ),
        'start.made_by': (
            'configs/distill/revit-s_feature-distill-deit-s_4xb256-100e_in1k.py',
            'the layers its pyramid reads',
        ),
        'pretraining.from': ('DeiT-S', "the method's DeiT start"),
        'pretraining.epochs': (100, "a third of DeiT's schedule (docs/pretraining.md)"),
        'pretraining.mixup': (False, 'no labels'),
        'pretraining.loss': (
            'feature MSE to deit_small_patch16_224.fb_in1k, layers pyramid',
            "DeiT's layers that its pyramid reads",
        ),
    },
    intended={'model.backbone.init_cfg.*': 'its DeiT start feature-distilled from DeiT-S (docs/pretraining.md)'},
)
