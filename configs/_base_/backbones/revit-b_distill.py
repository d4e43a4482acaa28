# A DeiT-imitation CONTROL start for the COCO / ADE20K recipes (docs/pretraining.md): reViT-B feature-distilled
# from DeiT-B at the layers its pyramid reads (configs/distill/revit-b_feature-distill-deit-b_4xb256-100e_in1k.py), from its DeiT start: it can
# bring the method towards PlainViT's start and no further. Not its paper's start (revit-b_in1k.py): name this file
# instead as a recipe's second _base_ for the control.
_base_ = './revit-s_distill.py'
backbone = dict(
    arch='base',
    init_cfg=dict(
        type='Pretrained',
        checkpoint='checkpoints/revit-base_distill-deit-b.pth',
        made_by='python tools/train.py configs/distill/revit-b_feature-distill-deit-b_4xb256-100e_in1k.py'
        ' --work-dir work_dirs/revit-base_distill-deit-b'
        ' && cp $(cat work_dirs/revit-base_distill-deit-b/last_checkpoint) checkpoints/revit-base_distill-deit-b.pth',
    ),
)
backbone_recipe = dict(
    paper_start='configs/cls/revit-base_4xb256_in1k.py',
    differs={
        'paper_start': (
            'configs/distill/revit-b_feature-distill-deit-b_4xb256-100e_in1k.py',
            'a DeiT-imitation control (docs/pretraining.md)',
        ),
        'start.checkpoint': (
            'revit-base_distill-deit-b.pth',
            'feature-distilled from DeiT-B: a DeiT-imitation control',
        ),
        'start.made_by': (
            'configs/distill/revit-b_feature-distill-deit-b_4xb256-100e_in1k.py',
            'the layers its pyramid reads',
        ),
        'pretraining.from': ('DeiT-B', "the method's DeiT-B start"),
        'pretraining.loss': (
            'feature MSE to deit_base_patch16_224.fb_in1k, layers pyramid',
            "DeiT-B's layers that its pyramid reads",
        ),
    },
    intended={'model.backbone.init_cfg.*': 'its DeiT start feature-distilled from DeiT-B (docs/pretraining.md)'},
)
