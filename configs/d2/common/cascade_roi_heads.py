# ViTDet's Cascade Mask R-CNN heads (projects/ViTDet/configs/COCO/cascade_mask_rcnn_vitdet_b_100ep.py): three
# 4conv1fc box heads with LN, class-agnostic boxes, IoU thresholds 0.5 / 0.6 / 0.7, on the Mask R-CNN's ROI heads.
from detectron2.config import LazyCall as L
from detectron2.layers import ShapeSpec
from detectron2.modeling.box_regression import Box2BoxTransform
from detectron2.modeling.matcher import Matcher
from detectron2.modeling.roi_heads import CascadeROIHeads, FastRCNNConvFCHead, FastRCNNOutputLayers

from .mask_rcnn_recvit import model

roi_heads = model.roi_heads
for key in ('box_head', 'box_predictor', 'proposal_matcher'):  # Cascade R-CNN has one of each per stage
    roi_heads.pop(key)
roi_heads.update(
    _target_=CascadeROIHeads,
    box_heads=[
        L(FastRCNNConvFCHead)(
            input_shape=ShapeSpec(channels=256, height=7, width=7),
            conv_dims=[256, 256, 256, 256],
            fc_dims=[1024],
            conv_norm='LN',
        )
        for _ in range(3)
    ],
    box_predictors=[
        L(FastRCNNOutputLayers)(
            input_shape=ShapeSpec(channels=1024),
            test_score_thresh=0.05,
            box2box_transform=L(Box2BoxTransform)(weights=(w1, w1, w2, w2)),
            cls_agnostic_bbox_reg=True,
            num_classes='${...num_classes}',
        )
        for w1, w2 in ((10, 5), (20, 10), (30, 15))
    ],
    proposal_matchers=[
        L(Matcher)(thresholds=[th], labels=[0, 1], allow_low_quality_matches=False) for th in (0.5, 0.6, 0.7)
    ],
)
