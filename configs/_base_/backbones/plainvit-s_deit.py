# PlainViT-S as the COCO / ADE20K recipes use it: from DeiT-S, block i <- DeiT block i (it is DeiT at its start).
_base_ = './plainvit-s.py'
backbone = dict(init_cfg=dict(type='Pretrained', checkpoint='checkpoints/deit_small_patch16_224-cd65a155.pth'))
