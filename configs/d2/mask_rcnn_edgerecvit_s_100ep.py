# Edge-RecViT-S, ViTDet's COCO recipe (common/mask_rcnn_recvit_100ep.py); the backbone as in the mm twin
# configs/det/mask-rcnn_edgerecvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py (its DeiT start included).
from mmrecvit.d2 import EdgeRecViT

from .common.mask_rcnn_recvit_100ep import dataloader, lr_multiplier, model, optimizer, recipe, train

model.backbone.net._target_ = EdgeRecViT
model.backbone.net.update(depth=12, shared_init_block=6, final_norm=True)


# The differences from ViTDet (common/mask_rcnn_recvit_100ep.py's `recipe`) and this backbone's:
recipe.intended.update(
    {
        'model.backbone.net._target_': 'Edge-RecViT, an mmrecvit backbone',
        'model.backbone.net.depth': None,  # 12 steps: the anchor's depth
        'model.backbone.net.shared_init_block': 'from DeiT: head/shared/tail <- blocks 0/6/11',
        'model.backbone.net.final_norm': "DeiT's final norm on the tail",
    }
)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train', 'recipe']
