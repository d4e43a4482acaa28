# Cascade Mask R-CNN on ViTDet's recipe (./mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py: data, schedule,
# optimizer, backbone, LayerNorm FPN and mask head, as ViTDet's cascade): the three stages of mmdet's
# _base_/models/cascade-mask-rcnn_r50_fpn.py (IoU thresholds 0.5/0.6/0.7, box target stds halved per stage,
# loss weights 1/0.5/0.25, class-agnostic SmoothL1 box regression), each box head ViTDet's 4-conv + 1-fc with
# LayerNorm. mmengine takes one `model` from the bases, so the stages are written here on the Mask R-CNN recipe's
# box head and RCNN sampling; tests/configs/test_recipes.py checks them against mmdet's file.
_base_ = './mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py'

stage_target_stds = ([0.1, 0.1, 0.2, 0.2], [0.05, 0.05, 0.1, 0.1], [0.033, 0.033, 0.067, 0.067])
stage_iou_thrs = (0.5, 0.6, 0.7)
model = dict(
    type='CascadeRCNN',
    roi_head=dict(
        type='CascadeRoIHead',
        num_stages=3,
        stage_loss_weights=[1, 0.5, 0.25],
        bbox_head=[
            dict(
                _base_.model.roi_head.bbox_head,
                reg_class_agnostic=True,
                bbox_coder=dict(type='DeltaXYWHBBoxCoder', target_means=[0.0, 0.0, 0.0, 0.0], target_stds=stds),
                loss_bbox=dict(type='SmoothL1Loss', beta=1.0, loss_weight=1.0),
            )
            for stds in stage_target_stds
        ],
    ),
    train_cfg=dict(
        rcnn=[
            dict(
                _base_.model.train_cfg.rcnn,
                assigner=dict(
                    _base_.model.train_cfg.rcnn.assigner,
                    pos_iou_thr=iou,
                    neg_iou_thr=iou,
                    min_pos_iou=iou,
                    match_low_quality=False,
                ),
            )
            for iou in stage_iou_thrs
        ]
    ),
)
# The anchor stays mmdet's projects/ViTDet Mask R-CNN (the projects have no cascade config): the cascade is the
# difference, its stages checked against mmdet's cascade-mask-rcnn_r50_fpn.py by tests/configs/test_recipes.py.
recipe = dict(
    intended={
        'model.type': "Cascade R-CNN (ViTDet's cascade twin)",
        'model.roi_head.type': 'CascadeRoIHead',
        'model.roi_head.num_stages': 'three stages',
        'model.roi_head.stage_loss_weights': "mmdet's 1 / 0.5 / 0.25",
        'model.roi_head.bbox_head*': "a box head per stage: ViTDet's 4-conv + 1-fc with LayerNorm, class-agnostic "
        'SmoothL1 regression, target stds halved per stage',
        'model.train_cfg.rcnn*': 'RCNN sampling per stage: IoU 0.5 / 0.6 / 0.7, no low-quality matches',
        'stage_*': "config variables of ours (the stages' IoU thresholds and target stds)",
    }
)
