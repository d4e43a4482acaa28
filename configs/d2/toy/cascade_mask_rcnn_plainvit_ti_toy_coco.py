# Toy (CPU) twin of ../cascade_mask_rcnn_plainvit_s_100ep.py: the PlainViT toy with Cascade R-CNN's three box
# stages (ViTDet's, ../common/cascade_roi_heads.py) at the toy's sizes (128-channel convs, a 256-wide fc, 5 classes).
import copy

from detectron2.modeling.roi_heads import CascadeROIHeads

from ..common.cascade_roi_heads import roi_heads as cascade
from .mask_rcnn_plainvit_ti_toy_coco import dataloader, lr_multiplier, model, optimizer, train


def make_cascade(roi_heads, cascade) -> None:
    """The toy's RoI heads (in place) with the three stages of `cascade` (a function: detectron2 keeps every
    module-level name of a LazyConfig file, and a detached box predictor's `${..num_classes}` cannot resolve
    when `default_setup` saves the config)."""
    box_head, box_predictor = roi_heads.pop('box_head'), roi_heads.pop('box_predictor')
    roi_heads.pop('proposal_matcher')
    roi_heads.update(
        _target_=CascadeROIHeads,
        box_heads=[copy.deepcopy(box_head) for _ in range(3)],
        box_predictors=[copy.deepcopy(box_predictor) for _ in range(3)],
        proposal_matchers=cascade.proposal_matchers,
    )
    for toy, stage in zip(roi_heads.box_predictors, cascade.box_predictors):  # the stages' box weights, agnostic boxes
        toy.update(
            box2box_transform=stage.box2box_transform, cls_agnostic_bbox_reg=True, num_classes=roi_heads.num_classes
        )


make_cascade(model.roi_heads, cascade)
del cascade, make_cascade
train.output_dir = 'work_dirs/d2_toy_cascade'

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train']
