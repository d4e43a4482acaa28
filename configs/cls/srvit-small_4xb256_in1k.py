# SR-ViT (SoftMoR, SPEC §1): DeiT-S blocks in units [4, 4, 2, 2], each run T=4 steps and mixed per token;
# the CLS token of the last unit's mixture is classified. Paper: 82.48 % top-1 (T=4) vs 79.83 % (T=1).
_base_ = './_base_/recvit-small_4xb256_in1k.py'
model = dict(backbone=dict(type='SRViT', arch='small', unit_sizes=(4, 4, 2, 2), num_recursions=4, readout='soft'))
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.num_recursions': 'the recursion steps of the method (docs/methods/)',
        'model.backbone.readout': "SR-ViT's readout",
        'model.backbone.unit_sizes': "SR-ViT's recursion units",
    }
)
