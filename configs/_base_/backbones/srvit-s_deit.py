# SR-ViT-S from DeiT-S as DeiT's function (router_init='function'): a CONTROL, not its paper's start (srvit-s_in1k.py).
# Its routers start on recursion 1 (weight 0.99) and its step transforms at zero, so its recursions start nearly
# without gradient (docs/pretraining.md); the start warning says so. Its ImageNet fine-tuning recipe
# (configs/cls/srvit-small_deit-pre_4xb256-100e_in1k.py) and configs/det/mask-rcnn_srvit-s-deit_*.py use it.
_base_ = './srvit-s.py'
backbone = dict(init_cfg=dict(type='Pretrained', checkpoint='checkpoints/deit_small_patch16_224-cd65a155.pth'))
backbone_recipe = dict(
    differs={
        'paper_start': ('DeiT release', "a control: DeiT's function, its recursions dormant (docs/pretraining.md)"),
    }
)
