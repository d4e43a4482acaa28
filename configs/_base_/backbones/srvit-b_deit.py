# SR-ViT-B as the COCO / ADE20K recipes use it: srvit-s_deit.py at ViT-B width, from DeiT-B.
_base_ = './srvit-s_deit.py'
backbone = dict(arch='base', init_cfg=dict(checkpoint='checkpoints/deit_base_patch16_224-b5f2ef4d.pth'))
