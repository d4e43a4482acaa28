# Edge-RecViT (SPEC §3), ViT-Adapter's ADE20K UperNet recipe: the _base_ below.
# The backbone is the method's in every recipe (upernet_edgerecvit-s_8xb2-160k_ade20k-512x512.py describes it and its knobs).
_base_ = './_base_/upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py'
model = dict(
    backbone=dict(type='EdgeRecViT', depth=12, shared_init_block=6, final_norm=True)
)  # from DeiT: head/shared/tail <- blocks 0/6/11, DeiT's final norm on the tail
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.depth': 'a recursive method: its layers (docs/methods/)',
        'model.backbone.final_norm': 'Edge-RecViT: the final norm on its last output',
        'model.backbone.shared_init_block': "Edge-RecViT's DeiT block for the shared blocks",
    }
)
