# Baseline: naive recursion (SPEC §0) - 3 unique DeiT-S blocks applied cyclically for 12 steps, the final
# state's CLS token classified.
_base_ = './_base_/recvit-small_4xb256_in1k.py'
model = dict(backbone=dict(type='NaiveRecursiveViT', arch='small', depth=12, num_blocks=3))
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.depth': 'a recursive method: its layers (docs/methods/)',
        'model.backbone.num_blocks': 'the shared blocks',
    }
)
