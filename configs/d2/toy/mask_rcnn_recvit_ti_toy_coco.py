# The toy (CPU) variant of the detectron2 recipe (../common/mask_rcnn_recvit_100ep.py): trains in minutes on 2 CPU
# cores. It changes only the data (the embedded toy COCO of tools/misc/make_toy_data.py, registered with
# register_coco_instances), the image size (256, padded square), the schedule (800 iterations of batch 2, AdamW
# 1e-3 with a 20-iteration warm-up and cosine decay, no layer decay: trained from scratch) and the sizes (ViT-Ti
# backbone without windows or checkpointing, 128-channel pyramid and heads, 5 classes, fewer proposals and RoIs),
# as the mm toy configs (configs/det/_base_/mask-rcnn_vit-ti_fpn_1xb2-800it_toy-coco.py) do.
# Per-method toys (mask_rcnn_<method>_ti_toy_coco.py) set `model.backbone.net` from the method's toy file
# (configs/_base_/backbones/<method>-toy.py), as their mm twins do.
# Data elsewhere: dataloader.train.dataset.names.root=DIR dataloader.test.dataset.names.root=DIR
import detectron2.data.transforms as T
from detectron2.config import LazyCall as L
from detectron2.layers import ShapeSpec
from detectron2.solver import WarmupParamScheduler
from fvcore.common.param_scheduler import CosineParamScheduler

from mmrecvit.d2 import PlainViT, register_toy_coco

from ..common.mask_rcnn_recvit_100ep import dataloader, model, optimizer, train

image_size, channels = 256, 128
toy_root = 'data/toy_coco'

dataloader.train.dataset.names = L(register_toy_coco)(root=toy_root, split='train')
dataloader.test.dataset.names = L(register_toy_coco)(root=toy_root, split='val')
dataloader.train.mapper.augmentations = [
    L(T.ResizeShortestEdge)(short_edge_length=image_size, max_size=image_size),
    L(T.RandomFlip)(horizontal=True),
]
dataloader.train.mapper.recompute_boxes = False
dataloader.train.mapper.instance_mask_format = 'bitmask'  # the toy masks are RLE
dataloader.test.mapper.augmentations = [L(T.ResizeShortestEdge)(short_edge_length=image_size, max_size=image_size)]
dataloader.train.total_batch_size = 2
dataloader.train.num_workers = dataloader.test.num_workers = 1

model.backbone.net = L(PlainViT)(arch='tiny', drop_path_rate=0.0)  # from scratch, global attention
model.backbone.out_channels = channels
model.backbone.square_pad = image_size
model.proposal_generator.head.in_channels = channels
model.proposal_generator.pre_nms_topk = (1000, 1000)
model.proposal_generator.post_nms_topk = (300, 300)
model.roi_heads.num_classes = 5
model.roi_heads.batch_size_per_image = 64
model.roi_heads.box_head.input_shape = ShapeSpec(channels=channels, height=7, width=7)
model.roi_heads.box_head.conv_dims = [channels] * 4
model.roi_heads.box_head.fc_dims = [256]
model.roi_heads.box_predictor.input_shape = ShapeSpec(channels=256)
model.roi_heads.mask_head.input_shape = ShapeSpec(channels=channels, width=14, height=14)
model.roi_heads.mask_head.conv_dims = [channels] * 3  # 2 convs and the deconvolution

train.max_iter = 800
train.seed = 0  # reproducible, as the mm toys' randomness.seed=0 (detectron2's default -1 draws a seed)
train.eval_period = train.max_iter
train.checkpointer.period = train.max_iter
train.log_period = 20
train.device = 'cpu'
train.amp.enabled = False
train.ddp.fp16_compression = False
train.output_dir = 'work_dirs/d2_toy'

optimizer.lr = 1e-3
optimizer.weight_decay = 0.05
optimizer.params.layer_decay_rate = 1.0
lr_multiplier = L(WarmupParamScheduler)(
    scheduler=L(CosineParamScheduler)(start_value=1.0, end_value=1e-3),
    warmup_length=20 / train.max_iter,
    warmup_factor=0.01,
)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
