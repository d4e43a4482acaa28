# Toy (CPU) twin of ../mask_rcnn_naiverecvit_s_100ep.py: the same method at the toy size (configs/_base_/backbones/
# naiverecvit-toy.py, as every toy of the method) on the toy recipe (mask_rcnn_recvit_ti_toy_coco.py).
from mmrecvit.d2 import use_backbone

from .mask_rcnn_recvit_ti_toy_coco import dataloader, lr_multiplier, model, optimizer, train

use_backbone(model, __file__, '../../_base_/backbones/naiverecvit-toy.py')

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
