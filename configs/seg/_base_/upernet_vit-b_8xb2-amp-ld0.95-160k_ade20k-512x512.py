# ViT-Adapter's ADE20K UperNet recipe (./upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py) at ViT-B width, from
# DeiT-B, with their ViT-B drop path 0.3 (layer decay 0.95 as for S). The width is set once, `embed_dim`; the neck's
# and heads' widths are restated from it (mmengine computed the base's from the base's embed_dim, 384).
_base_ = './upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py'

embed_dim = 768  # ViT-B
model = dict(
    backbone=dict(
        arch='base', drop_path_rate=0.3, init_cfg=dict(checkpoint='checkpoints/deit_base_patch16_224-b5f2ef4d.pth')
    ),
    neck=dict(in_channels=embed_dim),
    decode_head=dict(in_channels=[embed_dim // 4, embed_dim // 2, embed_dim, embed_dim]),
    auxiliary_head=dict(in_channels=embed_dim),
)
recipe = dict(
    intended={
        'model.backbone.arch': 'base = DeiT-B: 768 wide, 12 heads, 12 layers',
        'model.backbone.drop_path_rate': "ViT-Adapter's 0.3 for ViT-B",
        'model.auxiliary_head.in_channels': 'ViT-B width',
        'model.decode_head.in_channels': "the pyramid's widths at ViT-B",
        'model.neck.in_channels': 'ViT-B width',
        'embed_dim': 'ViT-B width',
    }
)
