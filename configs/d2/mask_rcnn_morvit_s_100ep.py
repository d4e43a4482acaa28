# MoR-ViT-S, ViTDet's COCO recipe (common/mask_rcnn_recvit_100ep.py); the backbone as in the mm twin
# configs/det/mask-rcnn_morvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py (its DeiT start included).
from mmrecvit.d2 import MoRViT

from .common.mask_rcnn_recvit_100ep import dataloader, lr_multiplier, model, optimizer, train

model.backbone.net._target_ = MoRViT
model.backbone.net.update(num_recursions=10, timm_init='average', timm_gates='open', router_alpha=1.0)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
