# Feature distillation of an mmrecvit backbone from a frozen timm teacher, without labels (issues 37.1, 45;
# mmrecvit/mm/feature_distill.py). From DeiT, the baseline itself, it is a DeiT-IMITATION CONTROL, not a paper's start:
# it trains a method to compute what PlainViT's start computes, at the layers the dense recipes' pyramid reads
# (layers='pyramid': the student's out_indices to DeiT's layers at the same relative depth, each layer normalised), so
# it can bring a student towards PlainViT and no further. (reViT's own distilled start, from DINOv2's final features:
# revit-s_feature-distill-dinov2-b_4xb256-100e_in1k.py.) PlainViT and SR-ViT represent DeiT already: no recipe.
# * data: any image folder (`data_root` / `data_prefix`): here ImageNet-1k's train images, their labels unused;
#   RandomResizedCrop 224 + flip, the teacher seeing the student's crop;
# * 100 epochs at batch 1024 (4 GPUs x 256), AdamW lr 5e-4 x batch/512, weight decay 0.05 (none on norms, biases,
#   positions, CLS), 5 warm-up epochs then cosine: DeiT's optimiser for a third of its schedule (decision: the
#   distillation schedule is not in our paper notes; `--cfg-options train_cfg.max_epochs=...`);
# * teacher: DeiT-S (the plain-ViT start of the dense recipes), by its timm name; MAE or DINOv2 the same way, e.g.
#   `--cfg-options model.teacher.name=vit_small_patch14_dinov2.lvd142m model.teacher.checkpoint=PATH` (a missing file
#   is an error with the command that fetches it);
# * student: the method's DeiT start (configs/_base_/backbones/<method>-s_deit.py, a per-method config's second
#   _base_) with its final norm, drop path 0.1; the DeiT start is where a distillation starts on purpose (purpose:
#   no start warning, mmrecvit/models/start.py).
# The last checkpoint is the dense recipes' distilled start (configs/_base_/backbones/<method>-s_distill.py).
_base_ = 'mmpretrain::_base_/default_runtime.py'
custom_imports = dict(imports=['mmrecvit.mm', 'mmrecvit.mm.feature_distill'], allow_failed_imports=False)

model = dict(
    type='FeatureDistiller',
    backbone=dict(final_norm=True, drop_path_rate=0.1, init_cfg=dict(purpose='distillation')),
    teacher=dict(name='deit_small_patch16_224.fb_in1k', checkpoint='checkpoints/deit_small_patch16_224-cd65a155.pth'),
    layers='pyramid',
    data_preprocessor=dict(
        type='ClsDataPreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True
    ),
)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    dataset=dict(
        type='CustomDataset', data_root='data/imagenet', data_prefix='train', with_label=False, pipeline=train_pipeline
    ),
    sampler=dict(type='DefaultSampler', shuffle=True),
)
max_epochs = 100
train_cfg = dict(by_epoch=True, max_epochs=max_epochs)
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=5e-4 * 1024 / 512, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={'pos_embed': dict(decay_mult=0.0), 'cls_token': dict(decay_mult=0.0)},
    ),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=5, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=5, end=max_epochs),
]
auto_scale_lr = dict(base_batch_size=1024)

# RecursionHook: the student's own auxiliary losses (routers, ranker) join the loss; RNGStateHook: exact resume;
# TF32Hook: TF32 matmuls on GPUs that have them (mmrecvit/mm/hooks/).
custom_hooks = [dict(type='RecursionHook'), dict(type='RNGStateHook'), dict(type='TF32Hook')]
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook', interval=10, max_keep_ckpts=2))
randomness = dict(seed=0, diff_rank_seed=True)
find_unused_parameters = False
