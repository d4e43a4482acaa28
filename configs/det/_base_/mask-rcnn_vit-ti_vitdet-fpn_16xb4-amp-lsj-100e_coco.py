# ViTDet's COCO recipe (./mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py) at ViT-Ti width (192 wide, 3 heads, 12
# layers), from DeiT-Ti: the iso-parameter reference of the shared-weight methods (docs/comparison.md). ViTDet's drop
# path 0.1 and layer decay 0.7 as for S. The width is set once, `embed_dim`; the neck's widths are restated from it.
_base_ = './mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py'

embed_dim = 192  # ViT-Ti
model = dict(
    backbone=dict(arch='tiny', init_cfg=dict(checkpoint='checkpoints/deit_tiny_patch16_224-a1311bcf.pth')),
    neck=[
        dict(_base_.model.neck[0], in_channels=embed_dim),
        dict(_base_.model.neck[1], in_channels=[embed_dim // 4, embed_dim // 2, embed_dim, embed_dim]),
    ],
)
recipe = dict(
    intended={
        'model.backbone.arch': 'ViT-Ti (192 wide, 3 heads, 12 layers), named by our arch',
        'model.backbone.init_cfg.checkpoint': 'DeiT-Ti (ImageNet-1k supervised) weights rather than MAE',
    }
)
