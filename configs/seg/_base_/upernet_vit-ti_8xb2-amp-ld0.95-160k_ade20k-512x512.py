# ViT-Adapter's ADE20K UperNet recipe (./upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py) at ViT-Ti width, from
# DeiT-Ti, with their ViT-T drop path 0.1 (layer decay 0.95 as for S): the iso-parameter reference of the shared-weight
# methods (docs/comparison.md). The width is set once, `embed_dim`; the neck's and heads' widths are restated from it.
_base_ = './upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py'

embed_dim = 192  # ViT-Ti
model = dict(
    backbone=dict(
        arch='tiny', drop_path_rate=0.1, init_cfg=dict(checkpoint='checkpoints/deit_tiny_patch16_224-a1311bcf.pth')
    ),
    neck=dict(in_channels=embed_dim),
    decode_head=dict(in_channels=[embed_dim // 4, embed_dim // 2, embed_dim, embed_dim]),
    auxiliary_head=dict(in_channels=embed_dim),
)
recipe = dict(
    intended={
        'model.backbone.arch': 'tiny = DeiT-Ti: 192 wide, 3 heads, 12 layers',
        'model.backbone.drop_path_rate': None,  # ViT-Adapter's 0.1 for ViT-T: the anchor's own
        'model.auxiliary_head.in_channels': 'ViT-Ti width',
        'model.decode_head.in_channels': "the pyramid's widths at ViT-Ti",
        'model.neck.in_channels': 'ViT-Ti width',
        'embed_dim': 'ViT-Ti width',
    }
)
