"""`tools/test.py --show-dir DIR` for segmentors: mmseg's visualizer, writing every drawn test image into DIR.

mmseg's `SegVisualizationHook` passes no file name to the visualizer, so its pictures go to the visualizer's
storage backends (`DIR/vis_data/vis_image/test_<image>_<iter>.png` when DIR is the backends' `save_dir`), beside
the config and scalars they also store. mmdet's hook (`test_out_dir`) and mmpretrain's (`out_dir`) write into a
folder of the user's choice; this visualizer gives mmseg the same: the hook is unchanged, the file name is added.
"""

from __future__ import annotations

import os.path as osp
from typing import Any

from mmseg.visualization import SegLocalVisualizer


class SegShowDirVisualizer(SegLocalVisualizer):
    """`SegLocalVisualizer` that saves each sample it draws as `out_dir/<image stem>.png`."""

    def __init__(self, name: str = 'visualizer', out_dir: str = '.', **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)  # mmengine's ManagerMixin needs `name` in the signature
        self.out_dir = out_dir

    def add_datasample(self, name: str, image: Any, data_sample: Any = None, *args: Any, **kwargs: Any) -> None:
        if kwargs.get('out_file') is None and data_sample is not None and 'img_path' in data_sample:
            stem = osp.splitext(osp.basename(data_sample.img_path))[0]
            kwargs['out_file'] = osp.join(self.out_dir, f'{stem}.png')
        super().add_datasample(name, image, data_sample, *args, **kwargs)
