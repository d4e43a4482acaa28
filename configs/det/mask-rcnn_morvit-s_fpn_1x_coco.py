# MoR-ViT (SPEC §4): DeiT-S first block, one shared block cycled num_recursions N_r=10 times with
# expert-choice routing (the default; capacities (N_r - r)/N_r), last block: depth 2 + 10 = 12
# applications; outputs after applications 3/6/9/12 (the default out_indices).
# Compute/accuracy knob at test time without retraining (one capacity per recursion, non-increasing):
#   --cfg-options "model.backbone.capacities=[1.0,0.8,0.6,0.5,0.4,0.3,0.2,0.15,0.1,0.05]"
# Token-choice routing: model.backbone.routing=token_choice
_base_ = './_base_/mask-rcnn_vit_fpn_1x_coco.py'
model = dict(
    backbone=dict(
        type='MoRViT',
        num_recursions=10,
        # from DeiT: first/last <- blocks 0/11, shared <- the mean of the tied blocks; gates open at scale 1.0, so a
        # recursion applies the whole block (MoR's from-scratch alpha 0.1 would cap every update at a tenth)
        timm_init='average',
        timm_gates='open',
        router_alpha=1.0,
    )
)
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.num_recursions': "MoR-ViT's recursions of the shared unit (docs/methods/)",
        'model.backbone.router_alpha': "MoR-ViT's router scale",
        'model.backbone.timm_gates': 'how gates start from a DeiT checkpoint (docs/methods/)',
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
    }
)
