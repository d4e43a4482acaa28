# Toy (CPU) twin of ../mask_rcnn_naiverecvit_s_100ep.py, the backbone as configs/det/mask-rcnn_naiverecvit-ti_fpn_1xb2-800it_toy-coco.py:
# 2 unique ViT-Ti blocks applied for 6 steps.
from mmrecvit.d2 import NaiveRecursiveViT

from .mask_rcnn_recvit_ti_toy_coco import dataloader, lr_multiplier, model, optimizer, train

model.backbone.net._target_ = NaiveRecursiveViT
model.backbone.net.update(depth=6, num_blocks=2, timm_init='cycle')

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
