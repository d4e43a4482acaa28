# Edge-RecViT (SPEC §3), ViT-Adapter's 3x COCO recipe: the _base_ below.
# The backbone is the method's in every recipe (mask-rcnn_edgerecvit-s_fpn_1x_coco.py describes it and its knobs).
_base_ = './_base_/mask-rcnn_vit_fpn_8xb2-ms-crop-3x_coco.py'
model = dict(
    backbone=dict(type='EdgeRecViT', depth=12, shared_init_block=6, final_norm=True)
)  # from DeiT: head/shared/tail <- blocks 0/6/11, DeiT's final norm on the tail
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.final_norm': 'Edge-RecViT: the final norm on its last output',
        'model.backbone.shared_init_block': "Edge-RecViT's DeiT block for the shared blocks",
    }
)
