# MoR-ViT (SPEC §4) at ViT-B width, ViTDet's COCO recipe (LSJ 1024, 100 epochs): the _base_ below.
# The backbone is the method's in every recipe (mask-rcnn_morvit-s_fpn_1x_coco.py describes it and its knobs).
_base_ = './_base_/mask-rcnn_vit-b_vitdet-fpn_16xb4-amp-lsj-100e_coco.py'
model = dict(
    backbone=dict(
        type='MoRViT',
        num_recursions=10,
        # from DeiT: first/last <- blocks 0/11, shared <- the mean of the tied blocks; gates open at scale 1.0, so a
        # recursion applies the whole block (MoR's from-scratch alpha 0.1 would cap every update at a tenth)
        timm_init='average',
        timm_gates='open',
        router_alpha=1.0,
    )
)
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.num_recursions': "MoR-ViT's recursions of the shared unit (docs/methods/)",
        'model.backbone.router_alpha': "MoR-ViT's router scale",
        'model.backbone.timm_gates': 'how gates start from a DeiT checkpoint (docs/methods/)',
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
    }
)
