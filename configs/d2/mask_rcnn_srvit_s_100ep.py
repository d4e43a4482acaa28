# SR-ViT (SoftMoR)-S, ViTDet's COCO recipe (common/mask_rcnn_recvit_100ep.py); the backbone, its start and its knobs:
# configs/_base_/backbones/srvit-s_in1k.py, as in every recipe of it (the mm twin:
# configs/det/mask-rcnn_srvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py).
from mmrecvit.d2 import use_backbone

from .common.mask_rcnn_recvit_100ep import dataloader, lr_multiplier, model, optimizer, recipe, train

use_backbone(model, __file__, '../_base_/backbones/srvit-s_in1k.py', recipe)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train', 'recipe']
