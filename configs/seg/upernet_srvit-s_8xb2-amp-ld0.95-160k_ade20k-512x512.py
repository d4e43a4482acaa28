# SR-ViT (SPEC §1), ViT-Adapter's ADE20K UperNet recipe: the _base_ below.
# The backbone is the method's in every recipe (upernet_srvit-s_8xb2-160k_ade20k-512x512.py describes it and its knobs).
_base_ = './_base_/upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py'
model = dict(
    backbone=dict(type='SRViT', unit_sizes=(4, 4, 2, 2), num_recursions=4, timm_init='function')
)  # from DeiT: the routers start on recursion 1 (weight 0.99): the model starts as DeiT
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
        'model.backbone.unit_sizes': "SR-ViT's recursion units",
    }
)
