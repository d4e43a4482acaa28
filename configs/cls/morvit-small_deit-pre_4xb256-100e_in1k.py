# MoR-ViT fine-tuned from DeiT-S. Init timm_init='average' (the shared block <- the mean of the 10 tied DeiT
# blocks, first/last <- blocks 0/11) with timm_gates='open' (the default: every gate starts at 0.99) and
# router_alpha=1.0: MoR's from-scratch alpha = 0.1 caps every gate at 0.1, which no DeiT start survives;
# with alpha 1 a chosen token gets (nearly) the whole block, DeiT's update (SPEC §6).
_base_ = './_base_/recvit-small_deit-pre_4xb256-100e_in1k.py'
model = dict(
    backbone=dict(
        type='MoRViT',
        arch='small',
        num_recursions=10,
        routing='expert_choice',
        timm_init='average',
        timm_gates='open',
        router_alpha=1.0,
    )
)
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.num_recursions': 'the recursion steps of the method (docs/methods/)',
        'model.backbone.routing': "MoR-ViT's routing",
        'model.backbone.timm_*': 'the DeiT start (above)',
        'model.backbone.router_alpha': 'gates that let a DeiT start through (above)',
    }
)
