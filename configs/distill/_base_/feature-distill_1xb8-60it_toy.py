# The toy (CPU) variant of ./feature-distill_4xb256-100e_in1k.py: the same distillation (the pyramid's layers) of an
# S-size student on the
# toy COCO images (any image folder serves; tools/misc/make_toy_data.py writes them) at 112x112 (a quarter of
# ImageNet's tokens: CPU time), 60 iterations of batch 8, minutes on 2 CPU cores. No pretrained weights are on these
# machines: the teacher is a stand-in, timm's randomly initialised ViT-S under seed 0 (the one
# tools/analysis_tools/init_distance.py `timm:vit_small_patch16_224` measures against), and the student starts from
# it through its method's DeiT start (init_from_teacher). docs/init_distance.md: how far each method starts from the
# teacher's function before and after.
_base_ = ['./feature-distill_4xb256-100e_in1k.py', '../../_base_/toy_schedule.py']

model = dict(
    backbone=dict(drop_path_rate=0.0),
    teacher=dict(_delete_=True, name='vit_small_patch16_224', stand_in_seed=0),
    init_from_teacher=True,
)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=112, crop_ratio_range=(0.5, 1.0), backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=8,
    num_workers=1,
    dataset=dict(data_root='data/toy_coco', data_prefix='train2017', pipeline=train_pipeline),
    sampler=dict(_delete_=True, type='InfiniteSampler', shuffle=True),
)
max_iters = 60
train_cfg, optim_wrapper, param_scheduler, auto_scale_lr, default_hooks, log_processor = _base_.pop('toy').schedule(
    max_iters, lr=5e-4, batch=8, warmup=10, validate=False
)
randomness = dict(_delete_=True, seed=0, diff_rank_seed=False)
