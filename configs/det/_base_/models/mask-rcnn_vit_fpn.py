# Mask R-CNN with an mmrecvit backbone: the model of every COCO recipe (../mask-rcnn_vit_*.py), and what every
# run of it needs (the mmrecvit imports and hooks, seeding, the test-time augmentation model).
#   backbone -> 4 stride-16 maps (recursion steps) -> SimplePyramid (strides 4/8/16/32) -> mmdet FPN -> RPN + RoI heads.
# The backbone is PlainViT-S from DeiT-S, from its backbone file (configs/_base_/backbones/plainvit-s_deit.py), taken
# out of `_base_` with its recipe data so that no key reaches the configs inheriting this one twice; per-method configs
# merge their method's backbone file into it (configs/_base_/backbones/).
# Widths follow `embed_dim`: mmengine evaluates this file before the configs inheriting it, so a recipe of another
# width sets `embed_dim` and restates the neck's widths from it (../mask-rcnn_vit-b_vitdet-fpn_16xb4-amp-lsj-100e_coco.py).
_base_ = ['mmdet::_base_/models/mask-rcnn_r50_fpn.py', '../../../_base_/backbones/plainvit-s_deit.py']
custom_imports = dict(imports=['mmrecvit.mm', 'mmrecvit.mm.tta', 'mmrecvit.mm.coco'], allow_failed_imports=False)

_base_.pop('backbone_recipe')  # PlainViT-S's recipe data: a recipe takes its own from its backbone file
embed_dim = 384  # ViT-S
model = dict(
    backbone=dict(_base_.pop('backbone'), _delete_=True, drop_path_rate=0.1),
    neck=[
        dict(type='SimplePyramid', in_channels=embed_dim),
        dict(
            type='FPN', in_channels=[embed_dim // 4, embed_dim // 2, embed_dim, embed_dim], out_channels=256, num_outs=5
        ),
    ],
)

# RecursionHook adds the backbones' auxiliary losses and recursion statistics to the loss dict / training log.
# RNGStateHook stores the random generators' states in checkpoints so that `--resume` continues exactly
# (bit-identical on CPU with randomness=dict(seed=..., deterministic=True); mmrecvit/mm/hooks/rng_state_hook.py).
# TF32Hook allows TensorFloat-32 in fp32 matmuls/convolutions on GPUs that have it (a no-op on CPU).
custom_hooks = [dict(type='RecursionHook'), dict(type='RNGStateHook'), dict(type='TF32Hook')]
# DDP: every backbone puts every parameter in every iteration's graph (tests/e2e/test_distributed.py),
# so DDP's cheaper default stays.
find_unused_parameters = False
# Every rank its own noise: rank r is seeded with seed + r (diff_rank_seed), so the stochastic backbones (drop path,
# Edge-RecViT's Gumbel noise, reViT's step dropout) and mmdet's RoI samplers draw independently on each GPU
# instead of repeating one sequence; the data sampler's shuffling seed is then drawn once and shared by the ranks.
randomness = dict(seed=0, diff_rank_seed=True)

# Test-time augmentation (`tools/test.py --tta`): the image and its horizontal flip, their boxes merged by NMS and
# each kept box with its own view's mask (mmdet's DetTTAModel merges no masks; mmrecvit/mm/tta.py), at mmdet's
# test scale; a recipe testing at another scale restates `tta_pipeline`.
tta_model = dict(type='MaskDetTTAModel', tta_cfg=dict(nms=dict(type='nms', iou_threshold=0.5), max_per_img=100))
tta_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='Resize', scale=(1333, 800), keep_ratio=True)],
            [dict(type='RandomFlip', prob=1.0), dict(type='RandomFlip', prob=0.0)],
            [dict(type='LoadAnnotations', with_bbox=True, with_mask=True)],
            [dict(type='PackDetInputs')],
        ],
    ),
]
