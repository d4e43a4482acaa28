# NaiveRecursiveViT-B: naiverecvit-small_4xb256_in1k.py at ViT-B width, the start of NaiveRecursiveViT's ViT-B dense recipes
# (configs/_base_/backbones/naiverecvit-b_in1k.py).
_base_ = './naiverecvit-small_4xb256_in1k.py'
embed_dim = 768
model = dict(backbone=dict(arch='base'), head=dict(in_channels=embed_dim))
recipe = dict(
    intended={
        'model.backbone.arch': 'base = ViT-B (768 wide, 12 heads, 12 layers)',
        'model.head.in_channels': 'the ViT-B width',
    }
)
