"""The embedded toy COCO / ADE20K / classification generator.

COCO, ADE20K and ImageNet cannot be downloaded on the project's machines, so the demo and the
end-to-end tests train on small synthetic sets written in the *real* on-disk layouts, which mmdet's
`CocoDataset`, mmseg's `ADE20KDataset` and mmpretrain's `ImageNet` read unchanged: toy COCO
(`make_toy_coco`, default ``data/toy_coco/``, see `coco`), toy ADE20K (`make_toy_ade20k`, default
``data/toy_ade/ADEChallengeData2016/``, see `ade`) and the toy classification set of shape crops
(`make_toy_cls`, default ``data/toy_cls/``, see `cls`). `make_toy_data` writes them under one root.

Every image is drawn from its own random generator, seeded by ``(seed, dataset, split, index)``,
so a file depends only on the seed, its split and its index (not on the other counts), and the
same seed gives byte-identical files. Each dataset root gets a small `MANIFEST_NAME` file that
records the generator version and arguments; a later call with the same arguments finds the set
complete and skips it (see `manifest`).

Modules: `draw` (noise, colour, shape filling, encoders), `coco`, `ade` and `cls` (one renderer
and writer per set; `ade_scene` paints the ADE20K scenes), `manifest` (completeness, skip / rewrite,
argument checks), `layout` (the sets under one data folder, config overrides). The package imports
only numpy, OpenCV, pycocotools and tqdm, and only relative imports inside itself, so
`tools/misc/make_toy_data.py` can load it without importing torch, mmdet or mmseg.
"""

from .ade import TOY_ADE_CLASSES, TOY_ADE_DIR, TOY_ADE_LABELS, TOY_ADE_MMSEG_INDICES, make_toy_ade20k, render_ade_image
from .cls import TOY_CLS_CLASSES, TOY_CLS_DIR, make_toy_cls, render_cls_image
from .coco import (
    MIN_VISIBLE_FRACTION,
    TOY_COCO_CLASSES,
    TOY_COCO_DIR,
    TOY_COCO_PALETTE,
    ToyCocoSample,
    make_toy_coco,
    render_coco_image,
)
from .layout import KINDS, make_toy_data, toy_data_cfg
from .manifest import MANIFEST_NAME, TOY_DATA_VERSION, ToyDataResult

__all__ = [
    'KINDS',
    'MANIFEST_NAME',
    'MIN_VISIBLE_FRACTION',
    'TOY_ADE_CLASSES',
    'TOY_ADE_DIR',
    'TOY_ADE_LABELS',
    'TOY_ADE_MMSEG_INDICES',
    'TOY_CLS_CLASSES',
    'TOY_CLS_DIR',
    'TOY_COCO_CLASSES',
    'TOY_COCO_DIR',
    'TOY_COCO_PALETTE',
    'TOY_DATA_VERSION',
    'ToyCocoSample',
    'ToyDataResult',
    'make_toy_ade20k',
    'make_toy_cls',
    'make_toy_coco',
    'make_toy_data',
    'render_ade_image',
    'render_cls_image',
    'render_coco_image',
    'toy_data_cfg',
]
