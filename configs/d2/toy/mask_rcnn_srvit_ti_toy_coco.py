# Toy (CPU) twin of ../mask_rcnn_srvit_s_100ep.py, the backbone as configs/det/mask-rcnn_srvit-ti_fpn_1xb2-800it_toy-coco.py:
# 6 ViT-Ti blocks in units [2, 2, 1, 1], T=4 (24 applications).
from mmrecvit.d2 import SRViT

from .mask_rcnn_recvit_ti_toy_coco import dataloader, lr_multiplier, model, optimizer, train

model.backbone.net._target_ = SRViT
model.backbone.net.update(depth=6, unit_sizes=(2, 2, 1, 1), num_recursions=4, timm_init='function')

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
