# reViT-B's own distilled start, the stronger-teacher variant of its paper's distillation: revit-s_distill-dinov2.py (from
# scratch to DINOv2-B/14's final features) at ViT-B width, made by configs/distill/revit-b_feature-distill-dinov2-b_4xb256-
# 100e_in1k.py. Name this file instead of revit-b_in1k.py (its supervised start) as a recipe's second _base_.
_base_ = './revit-s_distill-dinov2.py'
backbone = dict(
    arch='base',
    init_cfg=dict(
        checkpoint='checkpoints/revit-base_distill-dinov2-b.pth',
        made_by='python tools/train.py configs/distill/revit-b_feature-distill-dinov2-b_4xb256-100e_in1k.py'
        ' --work-dir work_dirs/revit-base_distill-dinov2-b'
        ' && cp $(cat work_dirs/revit-base_distill-dinov2-b/last_checkpoint) checkpoints/revit-base_distill-dinov2-b.pth',
    ),
)
backbone_recipe = dict(
    paper_start='configs/cls/revit-base_4xb256_in1k.py',
    differs={
        'paper_start': (
            'configs/distill/revit-b_feature-distill-dinov2-b_4xb256-100e_in1k.py',
            "its paper's distilled start (DINOv2), beside its supervised one",
        ),
        'start.checkpoint': (
            'revit-base_distill-dinov2-b.pth',
            "distilled from DINOv2-B/14's final features, as its paper",
        ),
        'start.made_by': (
            'configs/distill/revit-b_feature-distill-dinov2-b_4xb256-100e_in1k.py',
            "its paper's distillation",
        ),
    },
)
