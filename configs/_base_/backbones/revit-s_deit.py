# reViT-S as the COCO / ADE20K recipes use it: from DeiT-S (shared_init / router_init: revit-s.py), trained at the depth
# it is tested at (step_drop_rate=0.0; the -elastic recipes train with the paper's 0.3 and are the ones to test at
# other depths:  --cfg-options model.backbone.depth=8).
_base_ = './revit-s.py'
backbone = dict(
    step_drop_rate=0.0, init_cfg=dict(type='Pretrained', checkpoint='checkpoints/deit_small_patch16_224-cd65a155.pth')
)
backbone_recipe = dict(
    differs={
        'model.backbone.step_drop_rate': (0.0, 'trained at the depth it is tested at (the -elastic recipes: 0.3)')
    },
    intended={'model.backbone.step_drop_rate': "reViT's step dropout"},
)
