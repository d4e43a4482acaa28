# reViT-S, ViTDet's COCO recipe (common/mask_rcnn_recvit_100ep.py); the backbone as in the mm twin
# configs/det/mask-rcnn_revit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py (its DeiT start included).
from mmrecvit.d2 import ReViT

from .common.mask_rcnn_recvit_100ep import dataloader, lr_multiplier, model, optimizer, train

model.backbone.net._target_ = ReViT
model.backbone.net.update(depth=12, num_experts=4, step_drop_rate=0.0, timm_init='average', timm_gates='programmed')

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
