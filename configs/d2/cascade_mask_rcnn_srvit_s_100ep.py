# SR-ViT (SoftMoR)-S, ViTDet's Cascade Mask R-CNN recipe: mask_rcnn_srvit_s_100ep.py with the cascade heads.
from .common.cascade_roi_heads import roi_heads
from .mask_rcnn_srvit_s_100ep import dataloader, lr_multiplier, model, optimizer, train

model.roi_heads = roi_heads

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
