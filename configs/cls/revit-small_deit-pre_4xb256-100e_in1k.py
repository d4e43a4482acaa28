# reViT fine-tuned from DeiT-S. Init timm_init='average', timm_gates='programmed' (the defaults): shared
# attention and norms <- the mean of DeiT's blocks, expert e <- the mean FFN of the e-th of 4 groups of
# blocks, and the router programmed so that step t selects the expert of its own depth group (SPEC §6): the
# closest start to DeiT one shared attention allows.
_base_ = './_base_/recvit-small_deit-pre_4xb256-100e_in1k.py'
model = dict(
    backbone=dict(type='ReViT', arch='small', depth=12, num_experts=4, timm_init='average', timm_gates='programmed')
)
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.depth': 'a recursive method: its layers (docs/methods/)',
        'model.backbone.num_experts': "reViT's experts",
        'model.backbone.timm_*': 'the DeiT start (above)',
    }
)
