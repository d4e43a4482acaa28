# Toy (CPU) twin of ../mask_rcnn_edgerecvit_s_100ep.py, the backbone as configs/det/mask-rcnn_edgerecvit-ti_fpn_1xb2-800it_toy-coco.py:
# ViT-Ti head + shared x4 + tail (depth 6).
from mmrecvit.d2 import EdgeRecViT

from .mask_rcnn_recvit_ti_toy_coco import dataloader, lr_multiplier, model, optimizer, train

model.backbone.net._target_ = EdgeRecViT
model.backbone.net.update(depth=6, shared_init_block=3, final_norm=True)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
