# Toy (CPU) twin of ../mask_rcnn_revit_s_100ep.py, the backbone as configs/det/mask-rcnn_revit-ti_fpn_1xb2-800it_toy-coco.py:
# One ViT-Ti block applied 6 times, 4 experts.
from mmrecvit.d2 import ReViT

from .mask_rcnn_recvit_ti_toy_coco import dataloader, lr_multiplier, model, optimizer, train

model.backbone.net._target_ = ReViT
model.backbone.net.update(depth=6, num_experts=4, step_drop_rate=0.0, timm_init='average', timm_gates='programmed')

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
