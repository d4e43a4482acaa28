# MoR-ViT (SPEC §4): DeiT-S first block, one shared block cycled 10 times with expert-choice routing
# (capacities (N_r - r)/N_r, gate scale alpha = 0.1 as MoR's from-scratch recipe), last block.
# Token-choice routing: model.backbone.routing=token_choice
_base_ = './_base_/recvit-small_4xb256_in1k.py'
model = dict(backbone=dict(type='MoRViT', arch='small', num_recursions=10, routing='expert_choice'))
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.num_recursions': 'the recursion steps of the method (docs/methods/)',
        'model.backbone.routing': "MoR-ViT's routing",
    }
)
