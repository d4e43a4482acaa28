# NaiveRecursiveViT (baseline, SPEC §0) at ViT-B width, ViTDet's COCO recipe (LSJ 1024, 100 epochs): the _base_ below.
# The backbone is the method's in every recipe (mask-rcnn_naiverecvit-s_fpn_1x_coco.py describes it and its knobs).
_base_ = './_base_/mask-rcnn_vit-b_vitdet-fpn_16xb4-amp-lsj-100e_coco.py'
model = dict(
    backbone=dict(type='NaiveRecursiveViT', depth=12, num_blocks=3, timm_init='cycle')
)  # from DeiT: unique block j <- the mean of the DeiT blocks of the steps it runs (j, j+3, ...)
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.depth': None,  # 12, written out: the anchor's depth (not a difference)
        'model.backbone.num_blocks': 'the naive recursive ViT: its unique blocks, cycled over the 12 steps',
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
    }
)
