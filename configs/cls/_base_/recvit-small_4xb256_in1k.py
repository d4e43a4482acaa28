# ImageNet-1k classification of an mmrecvit backbone, from scratch: mmpretrain's DeiT-S recipe
# (deit/deit-small_4xb256_in1k.py: 300 epochs, AdamW lr 5e-4 x batch/512 with batch 4 x 256,
# weight decay 0.05, RandAugment m9-mstd0.5, random erasing 0.25, Mixup 0.8 / CutMix 1.0, label
# smoothing 0.1), brought back to the DeiT paper where mmpretrain's file differs: 5 warm-up epochs
# (mmpretrain's Swin schedule has 20), drop path 0.1 and repeated augmentation (3 repeats).
# Per-method configs (../<method>-small_4xb256_in1k.py) set only `model.backbone`, from their method's file
# (configs/_base_/backbones/<method>-s.py).
#   image -> backbone (out_type='cls_token': the final CLS token after the final norm) -> linear head
_base_ = 'mmpretrain::deit/deit-small_4xb256_in1k.py'
custom_imports = dict(imports=['mmrecvit.mm'], allow_failed_imports=False)

embed_dim = 384  # ViT-S; a per-method config changing the width must also set the head's in_channels
model = dict(
    backbone=dict(_delete_=True, type='PlainViT', arch='small', out_type='cls_token', drop_path_rate=0.1),
    head=dict(in_channels=embed_dim),
    # The backbones initialise themselves (timm's scheme, with the zero-initialised routers and step
    # transforms their papers and docs/methods/ ask for); mmpretrain's whole-model TruncNormal would overwrite
    # those. The head keeps its own init (zero, VisionTransformerClsHead's default).
    init_cfg=None,
)

# RecursionHook adds the backbones' auxiliary losses (router, ranker and expert losses) and recursion
# statistics to the loss dict / training log; RNGStateHook makes `--resume` exact (mmrecvit/mm/hooks/rng_state_hook.py);
# TF32Hook allows TensorFloat-32 in fp32 matmuls/convolutions on GPUs that have it (a no-op on CPU); StartMetaHook
# writes the last validation's top-1 into the last checkpoint's meta, so a dense recipe that starts from it can show
# its quality (tools/analysis_tools/compare.py; mmrecvit/mm/hooks/start_meta_hook.py).
custom_hooks = [
    dict(type='RecursionHook'),
    dict(type='RNGStateHook'),
    dict(type='TF32Hook'),
    dict(type='StartMetaHook'),
]
# AtomicCheckpointHook: mmengine's CheckpointHook with write + fsync + rename, then last_checkpoint, then deleting old
# ones, so a run killed at any moment (also mid-save) resumes from a complete checkpoint
# (mmrecvit/mm/hooks/atomic_checkpoint_hook.py).
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))
# Each rank draws its own augmentation and drop-path noise (as the dense recipes).
randomness = dict(_delete_=True, seed=0, diff_rank_seed=True)
# Every backbone puts every parameter in every iteration's graph (tests/e2e/test_distributed.py).
find_unused_parameters = False

# DeiT's repeated augmentation: each image 3 times per epoch, the copies on different GPUs (Hoffer et al.).
train_dataloader = dict(sampler=dict(type='RepeatAugSampler', shuffle=True))

param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=5, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=5),
]

# The anchor and every intended difference from it, as data (tools/analysis_tools/recipe_diff.py CONFIG --check).
recipe = dict(
    anchor='mmpretrain::deit/deit-small_4xb256_in1k.py',
    intended={
        'custom_imports.*': 'registers mmrecvit',
        'custom_hooks.*': 'RecursionHook, RNGStateHook, TF32Hook, StartMetaHook (above)',
        'default_hooks.checkpoint.type': 'AtomicCheckpointHook (above)',
        'find_unused_parameters': 'stated (above)',
        'randomness.*': 'seed 0 with diff_rank_seed (above)',
        'embed_dim': 'a config variable of ours',
        'model.backbone.type': 'an mmrecvit backbone',
        'model.backbone.arch': 'small = DeiT-S (384 wide, 6 heads, 12 layers)',
        'model.backbone.img_size': 'ours: 224 by default, any size at run time',
        'model.backbone.patch_size': "ours: the arch's 16",
        'model.backbone.out_type': 'the final CLS token after the final norm, as mmpretrain VisionTransformer',
        'model.backbone.drop_path_rate': "the DeiT paper's 0.1 (mmpretrain's file leaves 0)",
        'model.init_cfg*': "the backbones initialise themselves (above); mmpretrain's TruncNormal would overwrite it",
        'param_scheduler.LinearLR.end': "the DeiT paper's 5 warm-up epochs (mmpretrain: 20)",
        'param_scheduler.CosineAnnealingLR.begin': 'after the 5 warm-up epochs',
        'train_dataloader.sampler.type': "DeiT's repeated augmentation",
    },
)
