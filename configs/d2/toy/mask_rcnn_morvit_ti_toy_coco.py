# Toy (CPU) twin of ../mask_rcnn_morvit_s_100ep.py, the backbone as configs/det/mask-rcnn_morvit-ti_fpn_1xb2-800it_toy-coco.py:
# ViT-Ti first block, shared x4, last (depth 6).
from mmrecvit.d2 import MoRViT

from .mask_rcnn_recvit_ti_toy_coco import dataloader, lr_multiplier, model, optimizer, train

model.backbone.net._target_ = MoRViT
model.backbone.net.update(depth=6, timm_init='average', timm_gates='open', router_alpha=1.0)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
