# NaiveRecursiveViT-S (the baseline), ViTDet's COCO recipe (common/mask_rcnn_recvit_100ep.py); the backbone as in the mm twin
# configs/det/mask-rcnn_naiverecvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py (its DeiT start included).
from mmrecvit.d2 import NaiveRecursiveViT

from .common.mask_rcnn_recvit_100ep import dataloader, lr_multiplier, model, optimizer, recipe, train

model.backbone.net._target_ = NaiveRecursiveViT
model.backbone.net.update(depth=12, num_blocks=3, timm_init='cycle')


# The differences from ViTDet (common/mask_rcnn_recvit_100ep.py's `recipe`) and this backbone's:
recipe.intended.update(
    {
        'model.backbone.net._target_': 'NaiveRecursiveViT, an mmrecvit backbone',
        'model.backbone.net.depth': None,  # 12 steps: the anchor's depth
        'model.backbone.net.num_blocks': '3 unique blocks cycled over the 12 steps',
        'model.backbone.net.timm_init': 'from DeiT: unique block j <- the mean of the DeiT blocks of the steps it runs',
    }
)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train', 'recipe']
