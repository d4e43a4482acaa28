# ViTDet's COCO recipe (./mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py) at ViT-B width, from DeiT-B: ViTDet-B's
# drop path 0.1 and layer decay 0.7 are the S recipe's already. The width is set once, `embed_dim`; the neck's widths
# are restated from it (mmengine computed the base's from the base's embed_dim, 384).
_base_ = './mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py'

embed_dim = 768  # ViT-B
model = dict(
    backbone=dict(arch='base', init_cfg=dict(checkpoint='checkpoints/deit_base_patch16_224-b5f2ef4d.pth')),
    neck=[
        dict(_base_.model.neck[0], in_channels=embed_dim),
        dict(_base_.model.neck[1], in_channels=[embed_dim // 4, embed_dim // 2, embed_dim, embed_dim]),
    ],
)
recipe = dict(
    intended={
        'model.backbone.arch': "ViT-B (768 wide, 12 heads, 12 layers): the anchor's width, named by our arch",
        'model.backbone.init_cfg.checkpoint': 'DeiT-B (ImageNet-1k supervised) weights rather than MAE',
    }
)
