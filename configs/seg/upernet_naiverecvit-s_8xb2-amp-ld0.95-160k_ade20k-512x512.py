# NaiveRecursiveViT (baseline, SPEC §0), ViT-Adapter's ADE20K UperNet recipe: the _base_ below.
# The backbone is the method's in every recipe (upernet_naiverecvit-s_8xb2-160k_ade20k-512x512.py describes it and its knobs).
_base_ = './_base_/upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py'
model = dict(
    backbone=dict(type='NaiveRecursiveViT', depth=12, num_blocks=3, timm_init='cycle')
)  # from DeiT: unique block j <- the mean of the DeiT blocks of the steps it runs (j, j+3, ...)
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.depth': 'a recursive method: its layers (docs/methods/)',
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
    }
)
