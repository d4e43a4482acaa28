# Edge-RecViT (SPEC §3) at ViT-B width, ViTDet's COCO recipe (LSJ 1024, 100 epochs): the _base_ below.
# The backbone is the method's in every recipe (mask-rcnn_edgerecvit-s_fpn_1x_coco.py describes it and its knobs).
_base_ = './_base_/mask-rcnn_vit-b_vitdet-fpn_16xb4-amp-lsj-100e_coco.py'
model = dict(
    backbone=dict(type='EdgeRecViT', depth=12, shared_init_block=6, final_norm=True)
)  # from DeiT: head/shared/tail <- blocks 0/6/11, DeiT's final norm on the tail
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.depth': None,  # 12, written out: the anchor's depth (not a difference)
        'model.backbone.final_norm': 'Edge-RecViT: the final norm on its last output',
        'model.backbone.shared_init_block': "Edge-RecViT's DeiT block for the shared blocks",
    }
)
