# The toy variant of the COCO recipe: trains in minutes on 2 CPU cores (1 process x 2 images, 800 iterations).
# It inherits the real recipe and changes only the data (the embedded toy COCO written by
# tools/misc/make_toy_data.py), the image size, the schedule and the model size (ViT-Ti width,
# 128-channel FPN and heads). Each per-method toy config
# (../mask-rcnn_<method>-ti_fpn_1xb2-800it_toy-coco.py) takes `model.backbone` from its method's toy file
# (configs/_base_/backbones/<method>-toy.py: its real twin's backbone file at the toy size, trained from scratch):
# tests/configs/test_det_seg.py checks the pairs.
_base_ = ['./mask-rcnn_vit_fpn_1x_coco.py', '../../_base_/toy_schedule.py']

data_root = 'data/toy_coco/'
metainfo = dict(
    classes=('circle', 'square', 'triangle', 'ellipse', 'star'),
    palette=[(220, 20, 60), (0, 130, 200), (60, 180, 75), (255, 225, 25), (145, 30, 180)],
)
num_classes = 5
image_size = (256, 256)
embed_dim = 192  # toy backbones are ViT-Ti wide
fpn_channels = 128

model = dict(
    # trained from scratch (no DeiT-Ti weights) for 800 iterations: no stochastic depth
    backbone=dict(arch='tiny', drop_path_rate=0.0, init_cfg=None),
    neck=[
        dict(type='SimplePyramid', in_channels=embed_dim),
        dict(
            type='FPN',
            in_channels=[embed_dim // 4, embed_dim // 2, embed_dim, embed_dim],
            out_channels=fpn_channels,
            num_outs=5,
        ),
    ],
    rpn_head=dict(in_channels=fpn_channels, feat_channels=fpn_channels),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=fpn_channels),
        bbox_head=dict(in_channels=fpn_channels, fc_out_channels=256, num_classes=num_classes),
        mask_roi_extractor=dict(out_channels=fpn_channels),
        mask_head=dict(num_convs=2, in_channels=fpn_channels, conv_out_channels=fpn_channels, num_classes=num_classes),
    ),
    # 256x256 images hold a handful of objects: fewer proposals and sampled RoIs than COCO's.
    # Fewer RoIs and 2 mask convs (COCO: 512 and 4) make an iteration ~40 % cheaper on a CPU, and
    # more, smaller steps learn faster from scratch than fewer, larger ones (README "The demo").
    train_cfg=dict(rpn_proposal=dict(nms_pre=1000, max_per_img=300), rcnn=dict(sampler=dict(num=64))),
    test_cfg=dict(rpn=dict(nms_pre=1000, max_per_img=300)),
)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(
    batch_size=2, num_workers=1, dataset=dict(data_root=data_root, metainfo=metainfo, pipeline=train_pipeline)
)
val_dataloader = dict(
    batch_size=4, num_workers=1, dataset=dict(data_root=data_root, metainfo=metainfo, pipeline=test_pipeline)
)
test_dataloader = val_dataloader
tta_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='Resize', scale=image_size, keep_ratio=True)],
            [dict(type='RandomFlip', prob=1.0), dict(type='RandomFlip', prob=0.0)],
            [dict(type='LoadAnnotations', with_bbox=True, with_mask=True)],
            [dict(type='PackDetInputs')],
        ],
    ),
]
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator

max_iters = 800
train_cfg, optim_wrapper, param_scheduler, auto_scale_lr, default_hooks, log_processor = _base_.pop('toy').schedule(
    max_iters, lr=1e-3, batch=2
)
# Seeded alike on every rank (diff_rank_seed=False, unlike the real recipe). A toy runs in one process, where the
# switch changes only where the data sampler's seed comes from: `seed` itself with False, a draw from the numpy
# stream (broadcast from rank 0) with True. False keeps the toy's data order a function of `seed` alone. The
# 2-processes-equal-1 test (tests/e2e/test_distributed.py) would pass with True too: it compares
# backbones that draw no random numbers, DDP broadcasts rank 0's initial weights and the sampler seed is shared.
randomness = dict(seed=0, diff_rank_seed=False)
