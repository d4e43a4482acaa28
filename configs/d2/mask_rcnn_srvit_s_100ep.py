# SR-ViT (SoftMoR)-S, ViTDet's COCO recipe (common/mask_rcnn_recvit_100ep.py); the backbone as in the mm twin
# configs/det/mask-rcnn_srvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py (its DeiT start included).
from mmrecvit.d2 import SRViT

from .common.mask_rcnn_recvit_100ep import dataloader, lr_multiplier, model, optimizer, recipe, train

model.backbone.net._target_ = SRViT
model.backbone.net.update(unit_sizes=(4, 4, 2, 2), num_recursions=4, timm_init='function')


# The differences from ViTDet (common/mask_rcnn_recvit_100ep.py's `recipe`) and this backbone's:
recipe.intended.update(
    {
        'model.backbone.net._target_': 'SR-ViT (SoftMoR), an mmrecvit backbone',
        'model.backbone.net.unit_sizes': 'four units of 4, 4, 2, 2 blocks',
        'model.backbone.net.num_recursions': 'each unit applied up to 4 times',
        'model.backbone.net.timm_init': 'from DeiT: the routers start on recursion 1 (weight 0.99): the model starts as DeiT',
    }
)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train', 'recipe']
