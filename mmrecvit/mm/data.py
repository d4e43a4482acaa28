"""Bad samples in COCO / ADE20K layouts (issue 19): skipped or fixed with a logged warning naming the
file, or one clear error, instead of a crash deep inside a head or a silently wrong loss.

What mmdet 3.3 / mmseg 1.2 do by themselves (measured on the toy sets, tests/mm/test_data.py):

* COCO annotation with a zero-width/height box or a category id outside the classes: mmdet's
  `CocoDataset.parse_data_info` drops it, silently. `CheckedCocoDataset` (mmrecvit/mm/coco.py) drops
  the same, and says so.
* COCO annotation with an empty `segmentation`: mmdet keeps the box without a mask and
  `LoadAnnotations(with_mask=True)` then fails with `KeyError: 'mask'`. Dropped here, with a warning.
* COCO image file missing: mmengine's file reader raises `FileNotFoundError` when the sample is drawn,
  possibly hours into a run. `CheckedCocoDataset` drops the image when the dataset is built (one
  `stat` per image), with a warning. An image file that exists but does not decode stops with mmcv's
  `AssertionError: failed to load image: <path>` (names the file; decoding every image up front
  would cost a pass over the data).
* ADE20K image missing: mmseg lists the image folder, so the sample is simply not there.
* ADE20K label map with values outside the classes (other than `ignore_index`): mmseg passes them to
  the loss (an out-of-range target: an IndexError in the head on CPU, a device assert on GPU) and the
  metric. `CheckSegMap` (after `LoadAnnotations`) sets them to `ignore_index`, as for unlabelled
  pixels, with a warning naming the file and the values.
* ADE20K label map of another size than its image: mmseg crops/resizes the two separately, and the
  loss compares misaligned pixels. `CheckSegMap` stops with a `ValueError` naming both files and sizes.
"""

from __future__ import annotations

import logging

import numpy as np
from mmcv.transforms import BaseTransform
from mmengine.logging import print_log


def _warn(message: str) -> None:
    print_log(message, logger='current', level=logging.WARNING)


class CheckSegMap(BaseTransform):
    """Check a loaded segmentation map against its image and the classes (module docstring).

    dict(type='LoadAnnotations', reduce_zero_label=True), dict(type='CheckSegMap', num_classes=150),
    """

    def __init__(self, num_classes: int, ignore_index: int = 255) -> None:
        self.num_classes, self.ignore_index = num_classes, ignore_index

    def transform(self, results: dict) -> dict:
        seg = results.get('gt_seg_map')
        if seg is None:  # inference: the inferencers drop LoadAnnotations from the test pipeline
            return results
        image = tuple(results['ori_shape'][:2])
        if tuple(seg.shape[:2]) != image:
            raise ValueError(
                f'segmentation map {results.get("seg_map_path")!r} is {seg.shape[0]}x{seg.shape[1]}, '
                f'its image {results.get("img_path")!r} is {image[0]}x{image[1]}'
            )
        bad = (seg >= self.num_classes) & (seg != self.ignore_index)
        if bad.any():
            values = np.unique(seg[bad]).tolist()
            _warn(
                f'{results.get("seg_map_path")}: {int(bad.sum())} pixels with labels {values[:10]} outside the '
                f'{self.num_classes} classes: set to ignore_index={self.ignore_index}'
            )
            seg = seg.copy()
            seg[bad] = self.ignore_index
            results['gt_seg_map'] = seg
        return results
