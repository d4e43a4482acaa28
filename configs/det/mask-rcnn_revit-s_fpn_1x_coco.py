# reViT (SPEC §2): one shared DeiT-S block applied depth=12 times with num_experts=4 depth-programmed
# expert FFNs; outputs at the stage ends, layers (2, 5, 8, 11) (the default out_indices: the same relative depths
# at any depth).
# Trained at depth 12 (step_drop_rate=0.0); the -elastic variant trains with the paper's step dropout and is the
# one to test at other depths:  --cfg-options model.backbone.depth=8
_base_ = './_base_/mask-rcnn_vit_fpn_1x_coco.py'
model = dict(
    backbone=dict(
        type='ReViT',
        depth=12,
        num_experts=4,
        step_drop_rate=0.0,  # trained at the depth it is tested at (the -elastic variant: the paper's 0.3)
        # from DeiT: shared attention/norms <- the mean of DeiT's blocks; step t's gate picks its depth group's expert
        timm_init='average',
        timm_gates='programmed',
    )
)
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.num_experts': "reViT's experts per block",
        'model.backbone.step_drop_rate': "reViT's step dropout",
        'model.backbone.timm_gates': 'how gates start from a DeiT checkpoint (docs/methods/)',
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/)',
    }
)
