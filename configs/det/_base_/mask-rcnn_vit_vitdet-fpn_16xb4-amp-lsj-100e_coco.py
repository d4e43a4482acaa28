# ViTDet's COCO recipe (Li et al., "Exploring Plain Vision Transformer Backbones for Object Detection", ECCV 2022;
# as mmdet's projects/ViTDet) for an mmrecvit backbone:
# * large-scale jitter at 1024x1024 for 100 epochs: mmdet's common/lsj-100e_coco-instance.py (25 epochs of a
#   4x RepeatDataset, lr x0.1 at epochs 22 and 24), ViTDet's 250-iteration warm-up; tested at 1024 (longer side),
#   padded to 1024x1024 as in training, so the position embeddings are resampled to the training grid;
# * batch 64 = 16 GPUs x 4 images, AdamW lr 1e-4 (ViTDet's for batch 64), weight decay 0.1 except on norms and
#   positions, layer-wise lr decay 0.7 (mmrecvit's recursion-aware constructor), no gradient clipping, fp16 AMP;
# * backbone: drop path 0.1 (ViTDet-B's; S takes the same), window attention in 14x14 windows with global
#   attention at the ends of the 4 stages (the backbones' default global_steps), activation checkpointing;
# * LayerNorm in the FPN and the RoI heads (LN2d, mmrecvit/mm/norm.py), a 4-conv + 1-fc box head, a 2-conv RPN.
# Not ViTDet's: mmdet's FPN keeps its top-down path (ViTDet's simple pyramid has none), DeiT (ImageNet-1k
# supervised) rather than MAE weights (every difference: `recipe` below). ViTDet's relative position biases are on.
# Fewer GPUs: keep the batch of 64 with `--cfg-options optim_wrapper.accumulative_counts=K`, e.g. 8 GPUs x 4 images
# x K=2 or 4 GPUs x 4 x K=4 (GPU memory bounds the images per GPU; with_cp is on already). Do not add
# `--auto-scale-lr` then: it counts GPUs x images per GPU only (32 for 8x4 -> lr halved) and knows nothing of the
# accumulated steps. Without accumulation, `--auto-scale-lr` scales lr linearly to the batch actually used
# (auto_scale_lr.base_batch_size = 64). The epoch-based schedule is unchanged by K; the warm-up counts
# micro-batches: scale `param_scheduler[0].end` by K as well.
# bf16 backbone (A100/H100): `--amp-dtype bf16` runs the backbone under bf16 autocast inside the heads' fp16 one;
# with `--cfg-options optim_wrapper.type=OptimWrapper` as well, the heads run in fp32 (TF32) without loss scaling.
_base_ = ['./models/mask-rcnn_vit_fpn.py', 'mmdet::common/lsj-100e_coco-instance.py']
# A run killed at any moment (also mid-save) resumes from a complete checkpoint
# (mmrecvit/mm/hooks/atomic_checkpoint_hook.py).
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))

image_size = (1024, 1024)
head_norm_cfg = dict(type='LN2d', requires_grad=True)
model = dict(
    data_preprocessor=dict(
        pad_size_divisor=32, batch_augments=[dict(type='BatchFixedSizePad', size=image_size, pad_mask=True)]
    ),
    # use_rel_pos: ViTDet's decomposed relative position biases, zero at the DeiT start (mmrecvit/models/rel_pos.py)
    backbone=dict(drop_path_rate=0.1, window_size=14, with_cp=True, use_rel_pos=True),
    neck=[_base_.model.neck[0], dict(_base_.model.neck[1], norm_cfg=head_norm_cfg)],
    rpn_head=dict(num_convs=2),
    roi_head=dict(
        bbox_head=dict(type='Shared4Conv1FCBBoxHead', conv_out_channels=256, norm_cfg=head_norm_cfg),
        mask_head=dict(norm_cfg=head_norm_cfg),
    ),
)

test_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='Pad', size=image_size, pad_val=dict(img=(114, 114, 114))),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
# mmdet's CocoDataset inside mmdet's RepeatDataset, but bad annotations and missing images are dropped with a
# warning naming the file (mmrecvit/mm/coco.py).
train_dataloader = dict(batch_size=4, num_workers=4, dataset=dict(dataset=dict(type='CheckedCocoDataset')))
val_dataloader = dict(dataset=dict(type='CheckedCocoDataset', pipeline=test_pipeline))
test_dataloader = val_dataloader
# The flip is undone on the unpadded image's width, so it comes before the padding.
tta_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='Resize', scale=image_size, keep_ratio=True)],
            [dict(type='RandomFlip', prob=1.0), dict(type='RandomFlip', prob=0.0)],
            [dict(type='Pad', size=image_size, pad_val=dict(img=(114, 114, 114)))],
            [dict(type='LoadAnnotations', with_bbox=True, with_mask=True)],
            [dict(type='PackDetInputs')],
        ],
    ),
]

optim_wrapper = dict(
    _delete_=True,
    type='AmpOptimWrapper',  # fp16 autocast (its default dtype) with dynamic loss scaling
    constructor='LayerDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.1),
    paramwise_cfg=dict(
        layer_decay_rate=0.7,
        # 0.7 means for every method what it does to a plain ViT: each backbone gets the rate at which its embeddings
        # and blocks have a plain ViT's mean lr scale at 0.7 (mmrecvit/models/layer_decay.py; docs/comparison.md)
        layer_decay_policy='matched',
        norm_decay_mult=0.0,
        custom_keys={key: dict(decay_mult=0.0) for key in ('pos_embed', 'cls_token')},
    ),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=250),  # ViTDet's warm-up
    dict(type='MultiStepLR', begin=0, end=25, by_epoch=True, milestones=[22, 24], gamma=0.1),  # lsj-100e's steps
]

# The anchor (mmdet's projects/ViTDet, vendored: not in mmdet's wheel) and every intended difference from it, as data
# (tools/analysis_tools/recipe_diff.py CONFIG --check). key_map: our COCO set sits inside the RepeatDataset.
recipe = dict(
    anchor='vendor::mmdet-vitdet-394f758/projects/ViTDet/configs/vitdet_mask-rcnn_vit-b-mae_lsj-100e.py',
    key_map={
        'train_dataloader.dataset.dataset.': 'train_dataloader.dataset.',
        'train_dataloader.dataset.type': 'train_dataloader.repeat.type',
        'train_dataloader.dataset.times': 'train_dataloader.repeat.times',
    },
    intended={
        # schedule: the same 100 epochs, counted in epochs of a 4x RepeatDataset (mmdet's common LSJ)
        'train_dataloader.repeat.*': "mmdet's common/lsj-100e_coco-instance.py: 25 epochs of a 4x RepeatDataset",
        'train_cfg.*': '25 x 4 = 100 epochs (the anchor: 184375 iterations x 64 / 118000 images, the same 100)',
        'max_epochs': 'the epochs of the RepeatDataset (25)',
        'max_iters': 'the schedule is in epochs',
        'interval': 'the schedule is in epochs',
        'dynamic_intervals*': 'the schedule is in epochs',
        'param_scheduler.MultiStepLR.*': "steps at 88 and 96 epochs (22, 24 of the 4x set) = the anchor's iterations",
        'log_processor.by_epoch': 'the schedule is in epochs',
        'default_hooks.checkpoint.*': 'AtomicCheckpointHook (above) every epoch of the 4x set (7393 iterations)',
        # data: mmdet's common LSJ pipeline
        'train_pipeline': "mmdet's common LSJ: the flip after the crop (the same distribution)",
        'train_pipeline.Pad': 'no Pad step: BatchFixedSizePad pads the batch to 1024 (with 0 after normalisation)',
        'train_dataloader.dataset.pipeline': 'as train_pipeline',
        'train_dataloader.dataset.pipeline.Pad': 'as train_pipeline.Pad',
        'train_dataloader.num_workers': '4 loader workers per GPU',
        '*_dataloader.dataset.type': 'CheckedCocoDataset (above)',
        '*.backend_args': 'stated (None: local files)',
        'tta_*': 'flip test-time augmentation (tools/test.py --tta)',
        # runtime
        'custom_imports.*': "registers mmrecvit (not the anchor's projects.ViTDet)",
        'custom_*hooks.RecursionHook': "the backbones' auxiliary losses and statistics",
        'custom_*hooks.RNGStateHook': 'the RNG state in checkpoints (exact resume)',
        'custom_*hooks.TF32Hook': 'TF32 matmuls on Ampere+',
        'custom_*hooks.Fp16CompresssionHook': "a hook of mmdet's projects (not in its wheel): fp16 gradient all-reduce, "
        'a communication saving only',
        '*vis_backends.TensorboardVisBackend': 'no tensorboard events (local logs only)',
        'find_unused_parameters': 'stated: every parameter is in every graph',
        'randomness.*': 'seed 0 with diff_rank_seed',
        # model
        'embed_dim': 'a config variable of ours (the width the neck is computed from)',
        'head_norm_cfg.*': "a config variable of ours (the anchor's norm_cfg)",
        'norm_cfg.*': 'named head_norm_cfg here',
        'backbone_norm_cfg.*': "the backbones have their own LayerNorm (timm's, eps 1e-6)",
        'batch_augments*': 'written inside model.data_preprocessor (the same BatchFixedSizePad)',
        'model.backbone.type': 'an mmrecvit backbone',
        'model.backbone.arch': 'ViT-S (384 wide, 6 heads, 12 layers); the anchor is ViT-B (the -b recipe)',
        'model.backbone.embed_dim': 'from arch',
        'model.backbone.depth': 'from arch',
        'model.backbone.num_heads': 'from arch',
        'model.backbone.mlp_ratio': 'from arch (4)',
        'model.backbone.patch_size': 'from arch (16)',
        'model.backbone.qkv_bias': 'ours: the timm default (True)',
        'model.backbone.img_size': 'ours: any input size; positions resampled from the DeiT grid',
        'model.backbone.norm_cfg.*': "the backbones' own LayerNorm",
        'model.backbone.window_block_indexes': 'ours: global_steps (default: the stage ends 2, 5, 8, 11 = the '
        "complement of the anchor's window blocks)",
        'model.backbone.with_cp': 'activation checkpointing (the anchor: none, 32 GB GPUs)',
        'model.backbone.init_cfg.checkpoint': 'DeiT (ImageNet-1k supervised) weights rather than MAE',
        'model.neck*': "SimplePyramid (the recursion steps' maps) + mmdet's FPN with its top-down path, LayerNorm "
        "(the anchor: ViTDet's SimpleFPN from the last map)",
        'optim_wrapper.constructor': "mmrecvit's recursion-aware layer decay (the backbones' layer positions)",
        'optim_wrapper.paramwise_cfg.*': 'layer decay 0.7 (the same rate; for a recursive method the rate with a '
        "plain ViT's mean lr scale at 0.7) and no weight decay on norms, positions and the CLS token, in our "
        "constructor's words",
    },
)
