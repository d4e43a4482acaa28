# SR-ViT (SoftMoR, SPEC §1): the 12 DeiT-S blocks (depth from arch) in recursion units [4, 4, 2, 2],
# each unit run num_recursions T=4 times, its recursions mixed per token (readout='soft', the default):
# 48 block applications (num_steps) over depth 12 layers. The 4 units' last layers (out_indices (3, 7, 9, 11),
# the default) are the multi-level features.
# Compute/accuracy knob at test time without retraining:  --cfg-options model.backbone.eval_recursions=2
_base_ = './_base_/mask-rcnn_vit_fpn_1x_coco.py'
model = dict(
    backbone=dict(type='SRViT', unit_sizes=(4, 4, 2, 2), num_recursions=4, timm_init='function')
)  # from DeiT: the routers start on recursion 1 (weight 0.99): the model starts as DeiT
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.num_recursions': "SR-ViT's recursions of every unit (docs/methods/)",
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
        'model.backbone.unit_sizes': "SR-ViT's recursion units",
    }
)
