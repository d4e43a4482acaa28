"""The toy COCO set (`mmrecvit.datasets.toy`, written by tools/misc/make_toy_data.py) for detectron2.

`register_toy_coco(root, split)` registers `<root>/annotations/instances_<split>2017.json` with
detectron2's `register_coco_instances` and returns the dataset's name. A LazyConfig calls it where
the name is needed, `get_detection_dataset_dicts(names=L(register_toy_coco)(root=..., split='train'))`,
so the set is registered when the loader is instantiated (also by detectron2's own
`lazyconfig_train_net.py`) and `root` is one override away.
"""

from __future__ import annotations

import os
import os.path as osp

from detectron2.data import DatasetCatalog, MetadataCatalog
from detectron2.data.datasets import register_coco_instances

from ..models.checks import check_choice

SPLITS = ('train', 'val')


def register_toy_coco(root: str | os.PathLike = 'data/toy_coco', split: str = 'train') -> str:
    """Register one split of the toy COCO set at `root` (again if `root` changed); return its name."""
    check_choice('split', split, list(SPLITS))
    name = f'mmrecvit_toy_coco_{split}'
    json_file = osp.join(os.fspath(root), 'annotations', f'instances_{split}2017.json')
    image_root = osp.join(os.fspath(root), f'{split}2017')
    if not osp.isfile(json_file):
        raise FileNotFoundError(
            f'{json_file} not found: write the toy set with '
            f'`python tools/misc/make_toy_data.py --out {osp.dirname(os.fspath(root)) or "."}`'
        )
    if name in DatasetCatalog.list():
        if MetadataCatalog.get(name).json_file == json_file:
            return name
        DatasetCatalog.remove(name)
        MetadataCatalog.remove(name)
    register_coco_instances(name, {}, json_file, image_root)
    return name
