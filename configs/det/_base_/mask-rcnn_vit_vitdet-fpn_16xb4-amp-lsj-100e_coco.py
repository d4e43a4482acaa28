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
# Not ViTDet's: mmdet's FPN keeps its top-down path (ViTDet's simple pyramid has none), no relative position
# biases, DeiT (ImageNet-1k supervised) rather than MAE weights.
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
    data_preprocessor=dict(pad_size_divisor=32,
                           batch_augments=[dict(type='BatchFixedSizePad', size=image_size, pad_mask=True)]),
    # use_rel_pos: ViTDet's decomposed relative position biases, zero at the DeiT start (mmrecvit/models/rel_pos.py)
    backbone=dict(drop_path_rate=0.1, window_size=14, with_cp=True, use_rel_pos=True),
    neck=[_base_.model.neck[0], dict(_base_.model.neck[1], norm_cfg=head_norm_cfg)],
    rpn_head=dict(num_convs=2),
    roi_head=dict(
        bbox_head=dict(type='Shared4Conv1FCBBoxHead', conv_out_channels=256, norm_cfg=head_norm_cfg),
        mask_head=dict(norm_cfg=head_norm_cfg)))

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
    dict(type='TestTimeAug', transforms=[
        [dict(type='Resize', scale=image_size, keep_ratio=True)],
        [dict(type='RandomFlip', prob=1.0), dict(type='RandomFlip', prob=0.0)],
        [dict(type='Pad', size=image_size, pad_val=dict(img=(114, 114, 114)))],
        [dict(type='LoadAnnotations', with_bbox=True, with_mask=True)],
        [dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor',
                                               'flip', 'flip_direction'))],
    ]),
]

optim_wrapper = dict(
    _delete_=True,
    type='AmpOptimWrapper',  # fp16 autocast (its default dtype) with dynamic loss scaling
    constructor='LayerDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.1),
    paramwise_cfg=dict(layer_decay_rate=0.7, norm_decay_mult=0.0, custom_keys={
        'pos_embed': dict(decay_mult=0.0),
        'cls_token': dict(decay_mult=0.0),
    }))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=250),  # ViTDet's warm-up
    dict(type='MultiStepLR', begin=0, end=25, by_epoch=True, milestones=[22, 24], gamma=0.1),  # lsj-100e's steps
]
