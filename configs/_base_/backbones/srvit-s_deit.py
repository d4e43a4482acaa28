# SR-ViT-S as the COCO / ADE20K recipes use it: from DeiT-S, as DeiT's function (timm_init='function').
_base_ = './srvit-s.py'
backbone = dict(init_cfg=dict(type='Pretrained', checkpoint='checkpoints/deit_small_patch16_224-cd65a155.pth'))
