"""Test-time augmentation for instance segmentation: `MaskDetTTAModel` (`tools/test.py --tta`).

mmdet 3.3's `DetTTAModel` merges the boxes of flipped / rescaled views but refuses masks ("TTA of
instance segmentation does not support now"), so `--tta` fails on every Mask R-CNN config.
`MaskDetTTAModel` merges the boxes exactly as `DetTTAModel` does (every view's boxes mapped back to
the original image, flips undone; one class-wise NMS over all views; the best `max_per_img` kept)
and keeps with each surviving box the mask its own view predicted, flipped back the same way (our
decision: masks are not averaged across views, which would need the mask head re-run on the merged
boxes, as mmdet 2's `aug_test` did). Without masks it is `DetTTAModel`.

Imports mmdet's models, so it is not part of `import mmrecvit.mm`: det configs load it with
`custom_imports = dict(imports=['mmrecvit.mm', 'mmrecvit.mm.tta'])` and name it in `tta_model`.
"""

from __future__ import annotations

import torch
from mmcv.ops import batched_nms
from mmdet.models.test_time_augs import DetTTAModel
from mmdet.registry import MODELS
from mmdet.structures import DetDataSample
from mmengine.structures import InstanceData
from torch import Tensor

# mmdet's RandomFlip directions -> the mask axes they reverse ((N, H, W) masks)
FLIP_DIMS = {'horizontal': (-1,), 'vertical': (-2,), 'diagonal': (-2, -1)}


def unflip_masks(masks: Tensor, metainfo: dict) -> Tensor:
    """A view's (N, H, W) masks (in the original image's frame) with the view's flip undone."""
    return masks.flip(FLIP_DIMS[metainfo['flip_direction']]) if metainfo.get('flip') else masks


@MODELS.register_module()
class MaskDetTTAModel(DetTTAModel):
    """`DetTTAModel` that also merges instance masks (module docstring).

    Config (`tta_cfg` as `DetTTAModel`'s; the views come from the config's `tta_pipeline`, whose
    `PackDetInputs` must keep the 'flip' and 'flip_direction' meta keys):

        tta_model = dict(type='MaskDetTTAModel',
                         tta_cfg=dict(nms=dict(type='nms', iou_threshold=0.5), max_per_img=100))
    """

    def _merge_single_sample(self, data_samples: list[DetDataSample]) -> DetDataSample:
        if data_samples[0].pred_instances.get('masks', None) is None:
            return super()._merge_single_sample(data_samples)
        preds = [s.pred_instances for s in data_samples]
        metainfos = [s.metainfo for s in data_samples]
        bboxes, scores = self.merge_aug_bboxes([p.bboxes for p in preds], [p.scores for p in preds], metainfos)
        if bboxes.numel() == 0:
            return data_samples[0]
        labels = torch.cat([p.labels for p in preds])
        masks = torch.cat([unflip_masks(p.masks, m) for p, m in zip(preds, metainfos)])
        dets, keep = batched_nms(bboxes, scores, labels, self.tta_cfg.nms)  # dets (K, 5), by descending score
        keep = keep[: self.tta_cfg.max_per_img]
        results = InstanceData()
        results.bboxes = dets[: len(keep), :-1]
        results.scores = dets[: len(keep), -1]
        results.labels = labels[keep]
        results.masks = masks[keep]
        merged = data_samples[0]
        merged.pred_instances = results
        return merged
