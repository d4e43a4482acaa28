# Edge-RecViT-S as the COCO / ADE20K recipes use it: from DeiT-S, head/shared/tail <- blocks 0/6/11.
_base_ = './edgerecvit-s.py'
backbone = dict(init_cfg=dict(type='Pretrained', checkpoint='checkpoints/deit_small_patch16_224-cd65a155.pth'))
