# ViTDet's COCO recipe (projects/ViTDet/configs/COCO/mask_rcnn_vitdet_b_100ep.py) for an mmrecvit backbone:
# LSJ 1024, 100 epochs (184375 iterations of batch 64), AdamW lr 1e-4, weight decay 0.1 (none on norms and
# positions), layer-wise lr decay 0.7 with the backbone's recursion-aware layer depths (mmrecvit.d2.optim), step
# decay at 163889 and 177546, 250-iteration warm-up, fp16 AMP. Not ViTDet's: DeiT (ImageNet-1k supervised)
# rather than MAE weights, and they come through the backbone's `pretrained` (strict), not train.init_checkpoint.
# Fewer GPUs: keep dataloader.train.total_batch_size=64 only if it fits; otherwise scale optimizer.lr with it.
from detectron2 import model_zoo
from detectron2.config import LazyCall as L
from detectron2.solver import WarmupParamScheduler
from fvcore.common.param_scheduler import MultiStepParamScheduler

from mmrecvit.d2 import optimizer_params

from .coco_loader_lsj import dataloader
from .mask_rcnn_recvit import model

train = model_zoo.get_config('common/train.py').train
train.amp.enabled = True
train.ddp.fp16_compression = True
train.init_checkpoint = ''  # the backbone loads its own weights (model.backbone.net.pretrained)
train.max_iter = 184375  # 100 epochs = 184375 iterations x 64 images / 118000 images per epoch

lr_multiplier = L(WarmupParamScheduler)(
    scheduler=L(MultiStepParamScheduler)(values=[1.0, 0.1, 0.01], milestones=[163889, 177546],
                                         num_updates=train.max_iter),
    warmup_length=250 / train.max_iter,
    warmup_factor=0.001,
)

optimizer = model_zoo.get_config('common/optim.py').AdamW
optimizer.params._target_ = optimizer_params  # get_default_optimizer_params with our layer decay
optimizer.params.layer_decay_rate = 0.7
optimizer.params.overrides = {'pos_embed': {'weight_decay': 0.0}, 'cls_token': {'weight_decay': 0.0}}

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
