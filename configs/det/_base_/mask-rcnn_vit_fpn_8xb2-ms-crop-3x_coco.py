# ViT-Adapter's COCO recipe for a plain DeiT-S (Chen et al., "Vision Transformer Adapter for Dense Predictions",
# ICLR 2023; their detection/configs/mask_rcnn/mask_rcnn_deit_small_fpn_3x_coco.py) for an mmrecvit backbone:
# * 3x schedule: 36 epochs, lr x0.1 at epochs 27 and 33, 500-iteration warm-up (mmdet's
#   common/ms-poly_3x_coco-instance.py: 12 epochs of a 3x RepeatDataset, steps at 9 and 11);
# * DETR-style augmentation: flip, then either a multi-scale resize (shorter side 480..800) or a resize (400..600),
#   a random crop (384..600) and the multi-scale resize; at most 1024x1024 (ViT-Adapter's last crop);
# * batch 16 = 8 GPUs x 2 images, AdamW lr 1e-4, weight decay 0.05 except on positions, CLS, norms and biases, no
#   gradient clipping, no layer-wise lr decay (their DeiT configs have none: layer_decay_rate=1.0, the constructor
#   kept so that a decay is one value away), fp32 (TF32 where the GPU has it);
# * backbone: drop path 0.1, window attention in 14x14 windows with global attention at the ends of the 4 stages
#   (their window_attn pattern, the backbones' default global_steps), no activation checkpointing.
# Fewer GPUs: `--auto-scale-lr` scales lr linearly to the batch actually used (base_batch_size 16); or keep batch 16
# with `--cfg-options optim_wrapper.accumulative_counts=K` (e.g. 4 GPUs x 2 images x K=2) and no --auto-scale-lr
# (it counts GPUs x images per GPU only, not the accumulated steps); the warm-up counts micro-batches: scale its
# `end` (500) by K.
_base_ = [
    './models/mask-rcnn_vit_fpn.py',
    './recipes/mask-rcnn_vit_fpn_vs-r50.py',
    'mmdet::common/ms-poly_3x_coco-instance.py',
]
# A run killed at any moment (also mid-save) resumes from a complete checkpoint
# (mmrecvit/mm/hooks/atomic_checkpoint_hook.py).
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))

model = dict(backbone=dict(drop_path_rate=0.1, window_size=14, with_cp=False))

multi_scale = [
    (480, 1333),
    (512, 1333),
    (544, 1333),
    (576, 1333),
    (608, 1333),
    (640, 1333),
    (672, 1333),
    (704, 1333),
    (736, 1333),
    (768, 1333),
    (800, 1333),
]
train_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True, poly2mask=False),
    dict(type='RandomFlip', prob=0.5),
    dict(
        type='RandomChoice',
        transforms=[
            [dict(type='RandomChoiceResize', scales=multi_scale, keep_ratio=True)],
            [
                dict(type='RandomChoiceResize', scales=[(400, 1333), (500, 1333), (600, 1333)], keep_ratio=True),
                dict(type='RandomCrop', crop_type='absolute_range', crop_size=(384, 600), allow_negative_crop=True),
                dict(type='RandomChoiceResize', scales=multi_scale, keep_ratio=True),
            ],
        ],
    ),
    dict(type='RandomCrop', crop_type='absolute_range', crop_size=(1024, 1024), allow_negative_crop=True),
    dict(type='PackDetInputs'),
]
# mmdet's CocoDataset inside mmdet's RepeatDataset, but bad annotations and missing images are dropped with a
# warning naming the file (mmrecvit/mm/coco.py).
train_dataloader = dict(dataset=dict(dataset=dict(type='CheckedCocoDataset', pipeline=train_pipeline)))
val_dataloader = dict(dataset=dict(type='CheckedCocoDataset'))
test_dataloader = val_dataloader

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    constructor='LayerDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(
        layer_decay_rate=1.0,
        custom_keys={key: dict(decay_mult=0.0) for key in ('pos_embed', 'cls_token', 'norm', 'bias')},
    ),
)
# The anchor, mmdet's own 3x file (the same schedule, mmdet's common/ms-poly_3x_coco-instance.py: ViT-Adapter's
# repository is not vendored here), and this recipe's differences from it beyond the shared ones (recipe_diff).
recipe = dict(
    anchor='mmdet::mask_rcnn/mask-rcnn_r50_fpn_ms-poly-3x_coco.py',
    intended={
        'train_dataloader.dataset.dataset.type': 'CheckedCocoDataset inside the RepeatDataset',
        '*pipeline.RandomChoice': "ViT-Adapter's DETR-style choice: multi-scale resize, or resize + crop + resize",
        '*pipeline.RandomCrop': "ViT-Adapter's last crop to at most 1024x1024",
        '*pipeline.RandomResize': "mmdet's multi-scale resize (480..800), inside the RandomChoice here",
        'multi_scale*': 'a config variable of ours (the RandomChoice scales)',
        'model.backbone.window_size': 'window attention in 14x14 windows, global at the stage ends (ViT-Adapter)',
        'model.backbone.with_cp': 'stated: no activation checkpointing',
        'optim_wrapper.constructor': "mmrecvit's layer-decay constructor, at rate 1 (ViT-Adapter's DeiT configs: none)",
        'optim_wrapper.paramwise_cfg.layer_decay_rate': 'no layer-wise decay (1.0)',
        'optim_wrapper.paramwise_cfg.custom_keys.bias*': 'no weight decay on biases (ViT-Adapter)',
    },
    expected={'model.backbone.window_size': 14, 'optim_wrapper.paramwise_cfg.layer_decay_rate': 1.0},
)
