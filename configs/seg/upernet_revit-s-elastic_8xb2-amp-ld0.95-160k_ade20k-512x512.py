# reViT with the paper's elastic-depth training (SPEC §2): each step dropped with probability 0.3 per image in
# training, so that the model can be tested at other depths (--cfg-options model.backbone.depth=8); otherwise
# its fixed-depth twin upernet_revit-s_8xb2-amp-ld0.95-160k_ade20k-512x512.py.
_base_ = './upernet_revit-s_8xb2-amp-ld0.95-160k_ade20k-512x512.py'
model = dict(backbone=dict(step_drop_rate=0.3))
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.depth': 'a recursive method: its layers (docs/methods/)',
        'model.backbone.step_drop_rate': "reViT's step dropout",
        'model.backbone.timm_gates': 'how gates start from a DeiT checkpoint (docs/methods/)',
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
    }
)
