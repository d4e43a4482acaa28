"""Datasets shipped with mmrecvit: the embedded toy COCO / ADE20K / classification generator (`toy`)."""
from .toy import (
    MANIFEST_NAME,
    TOY_ADE_CLASSES,
    TOY_ADE_DIR,
    TOY_ADE_LABELS,
    TOY_ADE_MMSEG_INDICES,
    TOY_CLS_CLASSES,
    TOY_CLS_DIR,
    TOY_COCO_CLASSES,
    TOY_COCO_DIR,
    TOY_COCO_PALETTE,
    TOY_DATA_VERSION,
    ToyCocoSample,
    ToyDataResult,
    make_toy_ade20k,
    make_toy_cls,
    make_toy_coco,
    make_toy_data,
    render_ade_image,
    render_cls_image,
    render_coco_image,
    toy_data_cfg,
)

__all__ = [
    'MANIFEST_NAME', 'TOY_ADE_CLASSES', 'TOY_ADE_DIR', 'TOY_ADE_LABELS', 'TOY_ADE_MMSEG_INDICES', 'TOY_CLS_CLASSES',
    'TOY_CLS_DIR', 'TOY_COCO_CLASSES', 'TOY_COCO_DIR', 'TOY_COCO_PALETTE', 'TOY_DATA_VERSION', 'ToyCocoSample',
    'ToyDataResult', 'make_toy_ade20k', 'make_toy_cls', 'make_toy_coco', 'make_toy_data', 'render_ade_image',
    'render_cls_image', 'render_coco_image', 'toy_data_cfg',
]
