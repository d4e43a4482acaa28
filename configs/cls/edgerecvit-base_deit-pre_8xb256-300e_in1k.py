# Edge-RecViT-B: edgerecvit-small_deit-pre_8xb256-300e_in1k.py at ViT-B width, fine-tuned from DeiT-B (its paper's
# recipe at B), the start of Edge-RecViT's ViT-B dense recipes (configs/_base_/backbones/edgerecvit-b_in1k.py).
_base_ = './edgerecvit-small_deit-pre_8xb256-300e_in1k.py'
embed_dim = 768
deit_checkpoint = 'checkpoints/deit_base_patch16_224-b5f2ef4d.pth'
model = dict(backbone=dict(arch='base', init_cfg=dict(checkpoint=deit_checkpoint)), head=dict(in_channels=embed_dim))
recipe = dict(
    intended={
        'model.backbone.arch': 'base = ViT-B (768 wide, 12 heads, 12 layers)',
        'model.head.in_channels': 'the ViT-B width',
    }
)
