"""`CheckedCocoDataset`: mmdet's `CocoDataset` that drops unusable annotations and images with a warning
naming the file (what is checked and why: `mmrecvit.mm.data`). A module of its own, imported by the
det configs' `custom_imports`, because it derives from mmdet's class: `import mmrecvit.mm` stays free of
`mmdet.datasets`.
"""

from __future__ import annotations

import os.path as osp

from mmdet.datasets import CocoDataset
from mmdet.registry import DATASETS

from .data import _warn


@DATASETS.register_module()
class CheckedCocoDataset(CocoDataset):
    """mmdet's `CocoDataset`; bad annotations are dropped with a warning, so are missing images when
    training (evaluating without an image of the annotation file is a `FileNotFoundError` listing them)."""

    def _loads_masks(self) -> bool:
        return any(getattr(t, 'with_mask', False) for t in getattr(self.pipeline, 'transforms', []))

    def parse_data_info(self, raw_data_info: dict) -> dict:
        img, masks, dropped = raw_data_info['raw_img_info'], self._loads_masks(), []
        for ann in raw_data_info['raw_ann_info']:
            if ann.get('ignore', False):
                continue
            _, _, w, h = ann['bbox']
            if w < 1 or h < 1 or ann.get('area', 1) <= 0:
                why = f'a box of zero width or height {ann["bbox"]}'
            elif ann['category_id'] not in self.cat_ids:
                why = f'category id {ann["category_id"]} is not one of the {len(self.cat_ids)} classes'
            elif masks and not ann.get('segmentation'):
                why = 'an empty mask'  # mmdet would keep the box and fail in LoadAnnotations (KeyError 'mask')
            else:
                continue
            ann['ignore'] = True  # mmdet's own flag for annotations it skips
            dropped.append(f'annotation {ann.get("id")} ({why})')
        if dropped:
            _warn(f'{img["file_name"]}: dropped {"; ".join(dropped)}')
        return super().parse_data_info(raw_data_info)

    def filter_data(self) -> list:
        data = super().filter_data()
        missing = [info['img_path'] for info in data if not osp.isfile(info['img_path'])]
        if missing and self.test_mode:
            raise FileNotFoundError(f'{len(missing)} image(s) of {self.ann_file} are missing: {missing[:10]}')
        for path in missing:
            _warn(f'{path}: image file missing, its sample is dropped')
        return [info for info in data if info['img_path'] not in set(missing)]
