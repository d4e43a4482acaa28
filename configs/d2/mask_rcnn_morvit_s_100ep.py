# MoR-ViT-S, ViTDet's COCO recipe (common/mask_rcnn_recvit_100ep.py); the backbone as in the mm twin
# configs/det/mask-rcnn_morvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py (its DeiT start included).
from mmrecvit.d2 import MoRViT

from .common.mask_rcnn_recvit_100ep import dataloader, lr_multiplier, model, optimizer, recipe, train

model.backbone.net._target_ = MoRViT
model.backbone.net.update(num_recursions=10, timm_init='average', timm_gates='open', router_alpha=1.0)


# The differences from ViTDet (common/mask_rcnn_recvit_100ep.py's `recipe`) and this backbone's:
recipe.intended.update(
    {
        'model.backbone.net._target_': 'MoR-ViT, an mmrecvit backbone',
        'model.backbone.net.num_recursions': 'the shared block applied up to 10 times between the first and last',
        'model.backbone.net.timm_init': 'from DeiT: first/last <- blocks 0/11, shared <- the mean of the tied blocks',
        'model.backbone.net.timm_gates': 'from DeiT: gates open, so a recursion applies the whole block',
        'model.backbone.net.router_alpha': "gate scale 1.0 (MoR's from-scratch 0.1 would cap every update at a tenth)",
    }
)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train', 'recipe']
