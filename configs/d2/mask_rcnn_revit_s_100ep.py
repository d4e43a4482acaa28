# reViT-S, ViTDet's COCO recipe (common/mask_rcnn_recvit_100ep.py); the backbone as in the mm twin
# configs/det/mask-rcnn_revit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py (its DeiT start included).
from mmrecvit.d2 import ReViT

from .common.mask_rcnn_recvit_100ep import dataloader, lr_multiplier, model, optimizer, recipe, train

model.backbone.net._target_ = ReViT
model.backbone.net.update(depth=12, num_experts=4, step_drop_rate=0.0, timm_init='average', timm_gates='programmed')


# The differences from ViTDet (common/mask_rcnn_recvit_100ep.py's `recipe`) and this backbone's:
recipe.intended.update(
    {
        'model.backbone.net._target_': 'reViT, an mmrecvit backbone',
        'model.backbone.net.depth': None,  # 12 steps: the anchor's depth
        'model.backbone.net.num_experts': '4 expert MLPs per shared block',
        'model.backbone.net.step_drop_rate': 'trained at the depth it is tested at (the -elastic variant: 0.3)',
        'model.backbone.net.timm_init': "from DeiT: shared attention/norms <- the mean of DeiT's blocks",
        'model.backbone.net.timm_gates': "from DeiT: step t's gate picks its depth group's expert",
    }
)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train', 'recipe']
