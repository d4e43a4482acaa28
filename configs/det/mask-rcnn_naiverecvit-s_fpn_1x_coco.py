# Baseline: naive recursion (SPEC §0) - num_blocks=3 unique DeiT-S blocks applied cyclically for
# depth=12 steps; outputs after steps 3/6/9/12 (the default out_indices).
_base_ = './_base_/mask-rcnn_vit_fpn_1x_coco.py'
model = dict(
    backbone=dict(type='NaiveRecursiveViT', depth=12, num_blocks=3, timm_init='cycle')
)  # from DeiT: unique block j <- the mean of the DeiT blocks of the steps it runs (j, j+3, ...)
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.num_blocks': 'the naive recursive ViT: its unique blocks, cycled over the 12 steps',
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
    }
)
