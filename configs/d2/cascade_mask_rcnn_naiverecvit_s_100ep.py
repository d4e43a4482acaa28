# NaiveRecursiveViT-S (the baseline), ViTDet's Cascade Mask R-CNN recipe: mask_rcnn_naiverecvit_s_100ep.py with the cascade heads.
from .common.cascade_roi_heads import roi_heads
from .mask_rcnn_naiverecvit_s_100ep import dataloader, lr_multiplier, model, optimizer, recipe, train

model.roi_heads = roi_heads
del roi_heads  # LazyConfig.load keeps every module-level dict as a root (it reads no __all__)
# The same differences from ViTDet's Cascade twin (the heads are ViTDet's):
recipe.anchor = 'vendor::detectron2-02b5c4e2.tar.gz/projects/ViTDet/configs/COCO/cascade_mask_rcnn_vitdet_b_100ep.py'

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train', 'recipe']
