# UperNet with an mmrecvit backbone on ADE20K: mmseg's 160k recipe for ViTs (as its vit_deit-s16
# configs: AdamW, no decay on positions/tokens/norms, linear warm-up then poly).
# Per-method configs (../upernet_<method>-s_8xb2-160k_ade20k-512x512.py) set only `model.backbone`: their method's
# backbone file (configs/_base_/backbones/<method>-s_<start>.py) merged into the PlainViT-S backbone below
# (drop_path_rate applies to every method). That one is its backbone file's (plainvit-s_deit.py), taken out of
# `_base_` with its recipe data so that no key reaches the configs inheriting this one twice.
#   backbone -> 4 stride-16 maps (recursion steps) -> SimplePyramid (strides 4/8/16/32) -> UPerHead
_base_ = [
    'mmseg::_base_/models/upernet_r50.py',
    'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py',
    'mmseg::_base_/schedules/schedule_160k.py',
    '../../_base_/backbones/plainvit-s_deit.py',
]
_base_.pop('backbone_recipe')  # PlainViT-S's recipe data: a recipe takes its own from its backbone file
custom_imports = dict(imports=['mmrecvit.mm'], allow_failed_imports=False)

crop_size = (512, 512)
embed_dim = 384  # ViT-S; a per-method config changing the width must also set the neck/head channels
model = dict(
    data_preprocessor=dict(size=crop_size),
    pretrained=None,  # the backbone's init_cfg says what to load
    backbone=dict(_base_.pop('backbone'), _delete_=True, drop_path_rate=0.1),
    neck=dict(type='SimplePyramid', in_channels=embed_dim),
    decode_head=dict(in_channels=[embed_dim // 4, embed_dim // 2, embed_dim, embed_dim], channels=512, num_classes=150),
    auxiliary_head=dict(in_channels=embed_dim, in_index=2, num_classes=150),
)

# RecursionHook adds the backbones' auxiliary losses and recursion statistics to the loss dict / training log.
# RNGStateHook stores the random generators' states in checkpoints so that `--resume` continues exactly
# (bit-identical on CPU with randomness=dict(seed=..., deterministic=True); mmrecvit/mm/hooks/rng_state_hook.py).
# TF32Hook allows TensorFloat-32 in fp32 matmuls/convolutions on GPUs that have it (a no-op on CPU).
custom_hooks = [dict(type='RecursionHook'), dict(type='RNGStateHook'), dict(type='TF32Hook')]
# AtomicCheckpointHook: mmengine's CheckpointHook with write + fsync + rename, then last_checkpoint, then deleting old
# ones, so a run killed at any moment (also mid-save) resumes from a complete checkpoint
# (mmrecvit/mm/hooks/atomic_checkpoint_hook.py).
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))
# DDP: every backbone puts every parameter in every iteration's graph (tests/e2e/test_distributed.py),
# so DDP's cheaper default stays.
find_unused_parameters = False
# Every rank its own noise: rank r is seeded with seed + r (diff_rank_seed), so the stochastic backbones (drop path,
# Edge-RecViT's Gumbel noise, reViT's step dropout) and the random crops draw independently on each GPU instead of
# repeating one sequence; the data sampler's shuffling seed is then drawn once and shared by the ranks.
randomness = dict(seed=0, diff_rank_seed=True)

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=dict(custom_keys={key: dict(decay_mult=0.0) for key in ('pos_embed', 'cls_token', 'norm')}),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=160000, by_epoch=False),
]
# 8 GPUs x 2 images. Fewer GPUs: keep batch 16 with `--cfg-options optim_wrapper.accumulative_counts=K` (e.g.
# 4 GPUs x 2 images x K=2); the iteration-based loop and schedule count micro-batches, so multiply
# train_cfg.max_iters, the warm-up `end` and the poly `end` by K as well. (auto_scale_lr, which mmseg's recipes
# leave unset, would count GPUs x images per GPU only, not the accumulated steps.)
# mmseg's ADE20K pipelines with every map checked right after loading (labels outside the classes: ignored with a
# warning; a map of another size than its image: an error naming the file; mmrecvit/mm/data.py).
check_seg_map = dict(type='CheckSegMap', num_classes=150)
train_pipeline = [*_base_.train_pipeline[:2], check_seg_map, *_base_.train_pipeline[2:]]  # after LoadAnnotations
test_pipeline = [*_base_.test_pipeline[:3], check_seg_map, *_base_.test_pipeline[3:]]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

# The anchor this recipe is written against and every intended difference from it, as data:
# `python tools/analysis_tools/recipe_diff.py CONFIG --check` fails on any other (tests/tools/test_recipe_diff.py).
recipe = dict(
    anchor='mmseg::vit/vit_deit-s16_upernet_8xb2-160k_ade20k-512x512.py',
    intended={
        'custom_imports.*': 'registers mmrecvit',
        'custom_hooks.*': 'RecursionHook, RNGStateHook, TF32Hook (above)',
        'default_hooks.checkpoint.type': 'AtomicCheckpointHook (above)',
        'find_unused_parameters': 'stated (above); mmseg default False too',
        'randomness.*': 'diff_rank_seed (above)',
        'embed_dim': 'a config variable of ours',
        'check_seg_map.*': 'a config variable of ours: the CheckSegMap step',
        '*pipeline.CheckSegMap': 'label maps checked against num_classes (mmrecvit/mm/data.py)',
        'data_preprocessor.size': "mmseg's top-level copy of the crop; ours sets model.data_preprocessor.size",
        'model.backbone.type': 'an mmrecvit backbone',
        'model.backbone.arch': 'small = DeiT-S: 384 wide, 6 heads, 12 layers, patch 16, MLP x4, qkv bias, CLS token',
        'model.backbone.init_cfg.*': 'the DeiT-S checkpoint (mmseg: model.pretrained)',
        'model.backbone.[aeimnpqw]*[!h]': 'mmseg VisionTransformer arguments that our `arch` says (not drop_path_rate)',
        'model.backbone.drop_rate': 'no dropout in our blocks (mmseg: 0.0, the same)',
        'model.backbone.out_indices': 'the class default (the ends of the 4 quarters of the applications)',
        'model.pretrained': 'the backbone init_cfg loads the DeiT-S checkpoint',
        'model.neck*': 'SimplePyramid makes strides 4/8/16/32 from the stride-16 steps (mmseg: no neck)',
        'model.decode_head.in_channels': "the pyramid's widths (D/4, D/2, D, D)",
        'model.auxiliary_head.in_index': "the stride-16 map (mmseg's index 3 is its last ViT map)",
        'train_cfg.max_iters': "160k as both files' names; mmseg's deit-s16 160k file inherits its base's 80k schedule",
        'train_cfg.val_interval': 'every 10% of the 160k schedule',
        'default_hooks.checkpoint.interval': 'every 10% of the 160k schedule',
        'param_scheduler.PolyLR.end': 'the 160k schedule',
    },
)
