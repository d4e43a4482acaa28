# Mask R-CNN with an mmrecvit backbone on COCO: mmdet's 1x recipe adapted to ViTs.
# Per-method configs (../mask-rcnn_<method>-s_fpn_1x_coco.py) set only `model.backbone`: their method's backbone file
# (configs/_base_/backbones/<method>-s_<start>.py) merged into the PlainViT-S backbone of the model
# (./models/mask-rcnn_vit_fpn.py: drop_path_rate applies to every method).
# 8 GPUs x 2 images. Fewer GPUs: `--auto-scale-lr` scales lr linearly to the batch actually used; or keep batch 16
# with `--cfg-options optim_wrapper.accumulative_counts=K` (e.g. 4 GPUs x 2 images x K=2) and no --auto-scale-lr
# (it counts GPUs x images per GPU only, not the accumulated steps); the iteration-based warm-up then counts
# micro-batches: scale its `end` (1000) by K too.
_base_ = [
    './models/mask-rcnn_vit_fpn.py',
    './recipes/mask-rcnn_vit_fpn_vs-r50.py',
    'mmdet::_base_/datasets/coco_instance.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
]
# A run killed at any moment (also mid-save) resumes from a complete checkpoint
# (mmrecvit/mm/hooks/atomic_checkpoint_hook.py).
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))
# mmdet's CocoDataset, but bad annotations and missing images are dropped with a warning naming the file
# (mmrecvit/mm/coco.py).
train_dataloader = dict(dataset=dict(type='CheckedCocoDataset'))
val_dataloader = dict(dataset=dict(type='CheckedCocoDataset'))
test_dataloader = val_dataloader

# AdamW as for ViTDet; no weight decay on positions, tokens and norms.
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(custom_keys={key: dict(decay_mult=0.0) for key in ('pos_embed', 'cls_token', 'norm')}),
    clip_grad=dict(max_norm=1.0, norm_type=2),
)
# Layer-wise lr decay that understands recursion (off here; on in the ViTDet recipe, mmrecvit/mm/optim.py): each
# backbone parameter's lr is scaled by layer_decay_rate ** (num_layers - backbone.layer_depth(name)); shared blocks
# get the mean depth of their applications, routers and the neck/heads scale 1. To use it:
#   optim_wrapper = dict(constructor='LayerDecayOptimWrapperConstructor',
#                        paramwise_cfg=dict(layer_decay_rate=0.75))  # merged with the dict above
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=1000),
    dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1),
]
auto_scale_lr = dict(enable=False, base_batch_size=16)
# The anchor, mmdet's own 1x file, and this recipe's differences from it beyond the shared ones (recipe_diff).
recipe = dict(
    anchor='mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py',
    intended={
        'optim_wrapper.clip_grad.*': 'gradient clipping at norm 1 (AdamW on a ViT)',
        'param_scheduler.LinearLR.end': "1000 warm-up iterations (mmdet's AdamW transformer recipes, e.g. Swin 1x)",
    },
    expected={'param_scheduler.LinearLR.end': 1000, 'optim_wrapper.clip_grad.max_norm': 1.0},
)
