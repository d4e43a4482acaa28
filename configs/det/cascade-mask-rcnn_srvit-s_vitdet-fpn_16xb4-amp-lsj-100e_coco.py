# SR-ViT (SPEC §1), Cascade Mask R-CNN on ViTDet's COCO recipe: the _base_ below.
# The backbone is the method's in every recipe (mask-rcnn_srvit-s_fpn_1x_coco.py describes it and its knobs).
_base_ = './_base_/cascade-mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py'
model = dict(
    backbone=dict(type='SRViT', unit_sizes=(4, 4, 2, 2), num_recursions=4, timm_init='function')
)  # from DeiT: the routers start on recursion 1 (weight 0.99): the model starts as DeiT
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.num_recursions': "SR-ViT's recursions of every unit (docs/methods/)",
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
        'model.backbone.unit_sizes': "SR-ViT's recursion units",
    }
)
