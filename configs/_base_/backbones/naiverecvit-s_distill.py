# The cheaper fair start of the COCO / ADE20K recipes (issue 37.1; docs/pretraining.md): naiverecvit-s_deit.py feature-
# distilled from DeiT-S without labels (configs/distill/naiverecvit-s_feature-distill-deit-s_4xb256-100e_in1k.py), as reViT's
# paper makes a start. To use it, name this file instead of naiverecvit-s_in1k.py as a recipe's second _base_.
_base_ = './naiverecvit-s_deit.py'
backbone = dict(
    init_cfg=dict(
        type='Pretrained',
        checkpoint='checkpoints/naiverecvit-small_distill-deit-s.pth',
        made_by='python tools/train.py configs/distill/naiverecvit-s_feature-distill-deit-s_4xb256-100e_in1k.py'
        ' --work-dir work_dirs/naiverecvit-small_distill-deit-s'
        ' && cp $(cat work_dirs/naiverecvit-small_distill-deit-s/last_checkpoint) checkpoints/naiverecvit-small_distill-deit-s.pth',
    )
)
backbone_recipe = dict(
    differs={
        'start*': "its DeiT start distilled to DeiT-S's final tokens (100 epochs): it cannot represent a plain ViT"
    },
    intended={'model.backbone.init_cfg.*': 'its DeiT start feature-distilled from DeiT-S (docs/pretraining.md)'},
)
