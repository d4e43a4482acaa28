# Edge-RecViT-S (SPEC §3, docs/methods/edge_recvit.md): a DeiT-S head block, one shared block up to 10 times, a tail
# block (the 12 layers of arch='small'); the EARR ranker gives each token its depth. Outputs after layers 3/6/9/12
# (the default out_indices). From DeiT (the authors' code): head/shared/tail <- blocks 0/6/11, DeiT's final norm on
# the tail (final_norm, the class default, written out). Compute/accuracy knobs at test time without retraining:
#   --cfg-options model.backbone.max_depth=8  (or depth_shift=-2)
_base_ = './plainvit-s.py'
backbone = dict(type='EdgeRecViT', shared_init_block=6, final_norm=True)
backbone_intended = {
    'model.backbone.shared_init_block': "Edge-RecViT's DeiT block for the shared block",
    'model.backbone.final_norm': 'Edge-RecViT: the final norm on its last output',
}
