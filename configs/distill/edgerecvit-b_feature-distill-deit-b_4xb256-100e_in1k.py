# Edge-RecViT-B feature-distilled from DeiT-B: edgerecvit-s_feature-distill-deit-s_4xb256-100e_in1k.py at ViT-B width (a
# DeiT-imitation control, the layers its pyramid reads), the student starting at its method's DeiT-B start.
_base_ = './edgerecvit-s_feature-distill-deit-s_4xb256-100e_in1k.py'
deit_b = 'checkpoints/deit_base_patch16_224-b5f2ef4d.pth'
model = dict(
    backbone=dict(arch='base', init_cfg=dict(checkpoint=deit_b)),
    teacher=dict(name='deit_base_patch16_224.fb_in1k', checkpoint=deit_b),
)
