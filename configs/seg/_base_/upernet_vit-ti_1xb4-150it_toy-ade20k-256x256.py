# The toy variant of the ADE20K recipe: trains in a few minutes on 2 CPU cores (1 process x 4 images,
# 150 iterations, 256x256 crops).
# It inherits the real recipe and changes only the data (the embedded toy ADE20K written by
# tools/misc/make_toy_data.py, in ADE20K's own layout and 150-class label space), the image size,
# the schedule and the model size (ViT-Ti width, 128-channel heads with GroupNorm: SyncBN needs
# GPUs, and GN does not depend on the batch, so 1 image per process works in distributed CPU runs).
# Each per-method toy config (../upernet_<method>-ti_1xb4-150it_toy-ade20k-256x256.py) takes `model.backbone` from
# its method's toy file (configs/_base_/backbones/<method>-toy.py: its real twin's backbone file at the toy size,
# trained from scratch): tests/configs/test_det_seg.py checks the pairs.
_base_ = './upernet_vit_8xb2-160k_ade20k-512x512.py'

data_root = 'data/toy_ade/ADEChallengeData2016'
crop_size = (256, 256)
embed_dim = 192  # toy backbones are ViT-Ti wide
norm_cfg = dict(type='GN', num_groups=16, requires_grad=True)
model = dict(
    data_preprocessor=dict(size=crop_size),
    # trained from scratch (no DeiT-Ti weights) for 150 iterations: no stochastic depth
    backbone=dict(arch='tiny', drop_path_rate=0.0, init_cfg=None),
    neck=dict(type='SimplePyramid', in_channels=embed_dim),
    decode_head=dict(
        in_channels=[embed_dim // 4, embed_dim // 2, embed_dim, embed_dim], channels=128, norm_cfg=norm_cfg
    ),
    auxiliary_head=dict(in_channels=embed_dim, channels=64, norm_cfg=norm_cfg),
)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='CheckSegMap', num_classes=150),  # labels outside the classes, a map of another size (mm/data.py)
    dict(type='RandomResize', scale=(320, 256), ratio_range=(0.8, 1.25), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(320, 256), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='CheckSegMap', num_classes=150),  # labels outside the classes, a map of another size (mm/data.py)
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=4, num_workers=1, dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, num_workers=1, dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader

max_iters = 150
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
optim_wrapper = dict(optimizer=dict(lr=1e-3))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=20),
    dict(type='PolyLR', eta_min=1e-6, power=1.0, begin=20, end=max_iters, by_epoch=False),
]
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=10),
    checkpoint=dict(type='AtomicCheckpointHook', by_epoch=False, interval=max_iters, max_keep_ckpts=1),
)
# Seeded alike on every rank (diff_rank_seed=False, unlike the real recipe): in one process the switch changes only
# where the data sampler's seed comes from (`seed` with False), so the toy's data order stays a function of `seed`
# (the reasoning in ../../det/_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py).
randomness = dict(seed=0, diff_rank_seed=False)
