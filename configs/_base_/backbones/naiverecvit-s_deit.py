# NaiveRecursiveViT-S as the COCO / ADE20K recipes use it: from DeiT-S through its shared_init ('cycle').
_base_ = './naiverecvit-s.py'
backbone = dict(init_cfg=dict(type='Pretrained', checkpoint='checkpoints/deit_small_patch16_224-cd65a155.pth'))
