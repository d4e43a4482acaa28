# reViT (SPEC §2) at ViT-B width, ViT-Adapter's ADE20K UperNet recipe: the _base_ below.
# The backbone is the method's in every recipe (upernet_revit-s_8xb2-160k_ade20k-512x512.py describes it and its knobs).
_base_ = './_base_/upernet_vit-b_8xb2-amp-ld0.95-160k_ade20k-512x512.py'
model = dict(
    backbone=dict(
        type='ReViT',
        depth=12,
        num_experts=4,
        step_drop_rate=0.0,  # trained at the depth it is tested at (the -elastic variant: the paper's 0.3)
        # from DeiT: shared attention/norms <- the mean of DeiT's blocks; step t's gate picks its depth group's expert
        timm_init='average',
        timm_gates='programmed',
    )
)
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.depth': 'a recursive method: its layers (docs/methods/)',
        'model.backbone.step_drop_rate': "reViT's step dropout",
        'model.backbone.timm_gates': 'how gates start from a DeiT checkpoint (docs/methods/)',
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
    }
)
