# Mask R-CNN with an mmrecvit backbone on COCO: mmdet's 1x recipe adapted to ViTs.
# Per-method configs (../mask-rcnn_<method>-s_fpn_1x_coco.py) set only `model.backbone`: its type and the
# arguments where the method differs from the class defaults, merged into the PlainViT-S backbone below
# (arch, drop_path_rate and init_cfg apply to every method).
#   backbone -> 4 stride-16 maps (recursion steps) -> SimplePyramid (strides 4/8/16/32)
#   -> mmdet FPN -> RPN + RoI heads.
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmrecvit'], allow_failed_imports=False)

embed_dim = 384  # ViT-S; a per-method config changing the width must also set the neck's channels
model = dict(
    backbone=dict(_delete_=True, type='PlainViT', arch='small', drop_path_rate=0.1,
                  init_cfg=dict(type='Pretrained', checkpoint='checkpoints/deit_small_patch16_224-cd65a155.pth')),
    neck=[
        dict(type='SimplePyramid', in_channels=embed_dim),
        dict(type='FPN', in_channels=[embed_dim // 4, embed_dim // 2, embed_dim, embed_dim], out_channels=256,
             num_outs=5),
    ])

# RecursionHook adds the backbones' auxiliary losses and recursion statistics to the loss dict / training log.
# RNGStateHook stores the random generators' states in checkpoints so that `--resume` continues exactly
# (bit-identical on CPU with randomness=dict(seed=..., deterministic=True); mmrecvit/mm/hooks.py).
custom_hooks = [dict(type='RecursionHook'), dict(type='RNGStateHook')]
# DDP: every backbone puts every parameter in every iteration's graph (tests/test_reliability_distributed.py),
# so DDP's cheaper default stays. Ranks are seeded alike (randomness.diff_rank_seed=False): the stochastic
# backbones (drop path, Edge-RecViT's Gumbel noise, reViT's step dropout) draw the same noise sequence on
# every rank; set randomness=dict(seed=..., diff_rank_seed=True) to decorrelate it.
find_unused_parameters = False

# AdamW as for ViTDet; no weight decay on positions, tokens and norms.
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(custom_keys={
        'pos_embed': dict(decay_mult=0.0),
        'cls_token': dict(decay_mult=0.0),
        'norm': dict(decay_mult=0.0),
    }),
    clip_grad=dict(max_norm=1.0, norm_type=2))
# Layer-wise lr decay that understands recursion (off by default; mmrecvit/mm/optim.py): each backbone
# parameter's lr is scaled by layer_decay_rate ** (num_layers - backbone.layer_depth(name)); shared blocks
# get the mean depth of their applications, routers and the neck/heads scale 1. To use it:
#   optim_wrapper = dict(constructor='LayerDecayOptimWrapperConstructor',
#                        paramwise_cfg=dict(layer_decay_rate=0.75))  # merged with the dict above
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=1000),
    dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1),
]
# 8 GPUs x 2 images; `tools/train.py --auto-scale-lr` rescales lr for other batch sizes.
auto_scale_lr = dict(enable=False, base_batch_size=16)
