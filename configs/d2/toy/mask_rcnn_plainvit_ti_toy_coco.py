# Toy (CPU) twin of ../mask_rcnn_plainvit_s_100ep.py, the backbone as configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py:
# A 6-block ViT-Ti.
from mmrecvit.d2 import PlainViT

from .mask_rcnn_recvit_ti_toy_coco import dataloader, lr_multiplier, model, optimizer, train

model.backbone.net._target_ = PlainViT
model.backbone.net.update(depth=6)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
