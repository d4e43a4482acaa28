# NaiveRecursiveViT-S (the baseline), ViTDet's COCO recipe (common/mask_rcnn_recvit_100ep.py); the backbone as in the mm twin
# configs/det/mask-rcnn_naiverecvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py (its DeiT start included).
from mmrecvit.d2 import NaiveRecursiveViT

from .common.mask_rcnn_recvit_100ep import dataloader, lr_multiplier, model, optimizer, train

model.backbone.net._target_ = NaiveRecursiveViT
model.backbone.net.update(depth=12, num_blocks=3, timm_init='cycle')

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
