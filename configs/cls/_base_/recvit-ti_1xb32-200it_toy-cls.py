# The toy variant of the ImageNet recipe: a from-scratch ViT-Ti-size classifier that learns the toy
# classification set (mmrecvit.datasets.toy.cls: toy COCO's 5 shapes in their class colours, 64x64 crops,
# written by tools/misc/make_toy_data.py) in a few minutes on 2 CPU cores.
# It inherits the real recipe and changes only the data, the image size, the schedule and the model size;
# for a few hundred iterations from scratch it also drops the ImageNet regularisers (Mixup/CutMix,
# RandAugment, random erasing, drop path). Per-method toy configs set only `model.backbone`,
# from their method's toy file (configs/_base_/backbones/<method>-toy.py).
_base_ = ['./recvit-small_4xb256_in1k.py', '../../_base_/toy_schedule.py']

data_root = 'data/toy_cls/'
metainfo = dict(classes=('circle', 'ellipse', 'square', 'star', 'triangle'))  # sorted: mmpretrain's folder order
num_classes = 5
image_size = 64
embed_dim = 192  # toy backbones are ViT-Ti wide

# img_size: the position embedding is learnt at the toy resolution (a 4x4 grid), and resampled when the
# backbone is transferred (tools/demo.py --task transfer).
model = dict(
    backbone=dict(
        _delete_=True,
        type='PlainViT',
        arch='tiny',
        depth=6,
        drop_path_rate=0.0,
        img_size=image_size,
        out_type='cls_token',
    ),
    head=dict(num_classes=num_classes, in_channels=embed_dim),
    train_cfg=None,
)  # no batch augments (Mixup/CutMix)
data_preprocessor = dict(num_classes=num_classes)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    # the classes are rotation-invariant: both flips keep an image's class
    dict(type='RandomFlip', prob=[0.25, 0.25], direction=['horizontal', 'vertical']),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=32,
    num_workers=1,
    persistent_workers=True,
    dataset=dict(data_root=data_root, split='train', metainfo=metainfo, pipeline=train_pipeline),
    sampler=dict(_delete_=True, type='InfiniteSampler', shuffle=True),
)  # an iteration-based schedule
val_dataloader = dict(
    batch_size=100,
    num_workers=1,
    persistent_workers=True,
    dataset=dict(data_root=data_root, split='val', metainfo=metainfo, pipeline=test_pipeline),
)
test_dataloader = val_dataloader
val_evaluator = dict(topk=(1,))  # top-5 of 5 classes is always 100 %
test_evaluator = val_evaluator

max_iters = 200
train_cfg, optim_wrapper, param_scheduler, auto_scale_lr, default_hooks, log_processor = _base_.pop('toy').schedule(
    max_iters, lr=1e-3, batch=32, eta_min=1e-5
)
randomness = dict(_delete_=True, seed=0, diff_rank_seed=False)  # one process: as the toy det/seg configs
