# Edge-RecViT-S, ViTDet's COCO recipe (common/mask_rcnn_recvit_100ep.py); the backbone as in the mm twin
# configs/det/mask-rcnn_edgerecvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py (its DeiT start included).
from mmrecvit.d2 import EdgeRecViT

from .common.mask_rcnn_recvit_100ep import dataloader, lr_multiplier, model, optimizer, train

model.backbone.net._target_ = EdgeRecViT
model.backbone.net.update(depth=12, shared_init_block=6, final_norm=True)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
