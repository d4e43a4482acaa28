# The ImageNet-1k recipe (./recvit-small_4xb256_in1k.py) at ViT-B width: a per-method ViT-B start names it as its first
# _base_ and its method's backbone file as the second, as its -small recipe does (the methods whose -small recipe
# changes more than the backbone inherit that recipe and restate these lines instead).
_base_ = './recvit-small_4xb256_in1k.py'
embed_dim = 768
model = dict(backbone=dict(arch='base'), head=dict(in_channels=embed_dim))
recipe = dict(
    intended={
        'model.backbone.arch': 'base = ViT-B (768 wide, 12 heads, 12 layers)',
        'model.head.in_channels': 'the ViT-B width',
    }
)
