# SR-ViT-B from DeiT-B as DeiT's function: srvit-s_deit.py at ViT-B width, a CONTROL (its paper's start:
# srvit-b_in1k.py).
_base_ = './srvit-s_deit.py'
backbone = dict(arch='base', init_cfg=dict(checkpoint='checkpoints/deit_base_patch16_224-b5f2ef4d.pth'))
backbone_recipe = dict(paper_start='configs/cls/srvit-base_4xb256_in1k.py')
