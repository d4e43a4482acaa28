# PlainViT-S (the baseline), ViTDet's COCO recipe (common/mask_rcnn_recvit_100ep.py); the backbone as in the mm twin
# configs/det/mask-rcnn_plainvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py (its DeiT start included).
from mmrecvit.d2 import PlainViT

from .common.mask_rcnn_recvit_100ep import dataloader, lr_multiplier, model, optimizer, train

model.backbone.net._target_ = PlainViT

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
