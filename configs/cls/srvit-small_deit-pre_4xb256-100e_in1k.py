# SR-ViT fine-tuned from DeiT-S. Init timm_init='function' (the default): block i <- DeiT block i, step
# transforms zero and every router biased to step 1, so the T=4 model starts as DeiT's function (SPEC §6).
_base_ = './_base_/recvit-small_deit-pre_4xb256-100e_in1k.py'
model = dict(
    backbone=dict(
        type='SRViT', arch='small', unit_sizes=(4, 4, 2, 2), num_recursions=4, readout='soft', timm_init='function'
    )
)
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.num_recursions': 'the recursion steps of the method (docs/methods/)',
        'model.backbone.readout': "SR-ViT's readout",
        'model.backbone.unit_sizes': "SR-ViT's recursion units",
        'model.backbone.timm_init': 'the DeiT start (above)',
    }
)
