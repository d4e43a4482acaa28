# Edge-RecViT (SPEC §3): DeiT-S head block, one shared block up to 10 times, tail block (depth=12
# applications); the EARR ranker gives each token its depth. Outputs after steps 3/6/9/12 (the default
# out_indices). Compute/accuracy knobs at test time without retraining:
#   --cfg-options model.backbone.max_depth=8  (or depth_shift=-2)
_base_ = './_base_/upernet_vit_8xb2-160k_ade20k-512x512.py'
model = dict(
    backbone=dict(type='EdgeRecViT', depth=12, shared_init_block=6, final_norm=True)
)  # from DeiT: head/shared/tail <- blocks 0/6/11, DeiT's final norm on the tail
recipe = dict(
    intended={  # this method's arguments (recipe_diff against the base's anchor)
        'model.backbone.depth': 'a recursive method: its layers (docs/methods/)',
        'model.backbone.final_norm': 'Edge-RecViT: the final norm on its last output',
        'model.backbone.shared_init_block': "Edge-RecViT's DeiT block for the shared blocks",
    }
)
