# MoR-ViT (SPEC §4) at ViT-B width, ViT-Adapter's ADE20K UperNet recipe: the _base_ below.
# The backbone is the method's in every recipe (upernet_morvit-s_8xb2-160k_ade20k-512x512.py describes it and its knobs).
_base_ = './_base_/upernet_vit-b_8xb2-amp-ld0.95-160k_ade20k-512x512.py'
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
        'model.backbone.router_alpha': "MoR-ViT's router scale",
        'model.backbone.timm_gates': 'how gates start from a DeiT checkpoint (docs/methods/)',
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
    }
)
