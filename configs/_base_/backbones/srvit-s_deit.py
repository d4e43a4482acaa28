# SR-ViT-S as the COCO / ADE20K recipes use it: from DeiT-S, as DeiT's function (timm_init='function').
_base_ = './srvit-s.py'
backbone = dict(init_cfg=dict(type='Pretrained', checkpoint='checkpoints/deit_small_patch16_224-cd65a155.pth'))
backbone_recipe = dict(
    differs={  # from PlainViT's, where a comparison table shows it (tools/analysis_tools/compare.py)
        'start_distance': "timm_init='function': DeiT's function to 1e-4 (docs/init_distance.md)",
    },
)
