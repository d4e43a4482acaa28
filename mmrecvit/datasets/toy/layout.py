"""One data folder holding every toy set, and the config overrides that point the toy configs at it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .ade import TOY_ADE_DIR, make_toy_ade20k
from .cls import TOY_CLS_DIR, make_toy_cls
from .coco import TOY_COCO_DIR, make_toy_coco
from .manifest import PathLike, ToyDataResult

KINDS = ('coco', 'ade', 'cls')


def make_toy_data(
    root: PathLike = 'data',
    which: Sequence[str] = KINDS,
    seed: int = 0,
    size: int = 256,
    coco_train: int = 200,
    coco_val: int = 50,
    ade_train: int = 120,
    ade_val: int = 30,
    cls_train: int = 1000,
    cls_val: int = 250,
    cls_size: int = 64,
    force: bool = False,
    progress: bool = True,
) -> dict[str, ToyDataResult]:
    """Write the toy sets under ``root``: ``root/toy_coco/``, ``root/toy_ade/ADEChallengeData2016/`` and
    ``root/toy_cls/``.

    ``which`` selects among ``'coco'``, ``'ade'`` and ``'cls'``. ``size`` is the side of the COCO and
    ADE20K images, ``cls_size`` that of the classification crops. Returns one `ToyDataResult` per
    set, keyed by kind.
    """
    unknown = set(which) - set(KINDS)
    if unknown:
        raise ValueError(f'which: unknown dataset(s) {sorted(unknown)}; allowed: {", ".join(map(repr, KINDS))}')
    root = Path(root)
    out = {}
    if 'coco' in which:
        out['coco'] = make_toy_coco(
            root / TOY_COCO_DIR, coco_train, coco_val, size, seed, force=force, progress=progress
        )
    if 'ade' in which:
        out['ade'] = make_toy_ade20k(root / TOY_ADE_DIR, ade_train, ade_val, size, seed, force=force, progress=progress)
    if 'cls' in which:
        out['cls'] = make_toy_cls(
            root / TOY_CLS_DIR, cls_train, cls_val, cls_size, seed, force=force, progress=progress
        )
    return out


def toy_data_cfg(task: str, root: PathLike) -> dict[str, str]:
    """Config overrides (mmengine `--cfg-options` keys) that point a toy config at the toy sets in `root`.

    task: 'det' (toy COCO: dataset roots and the CocoMetric annotation file), 'seg' (toy ADE20K) or
    'cls' (the toy classification set).
    """
    if task == 'det':
        data_root = f'{root}/{TOY_COCO_DIR}/'
        ann = data_root + 'annotations/instances_val2017.json'
        return {
            **{f'{split}_dataloader.dataset.data_root': data_root for split in ('train', 'val', 'test')},
            'val_evaluator.ann_file': ann,
            'test_evaluator.ann_file': ann,
        }
    if task in ('seg', 'cls'):
        data_root = f'{root}/{TOY_ADE_DIR if task == "seg" else TOY_CLS_DIR}'
        return {f'{split}_dataloader.dataset.data_root': data_root for split in ('train', 'val', 'test')}
    raise ValueError(f"task must be 'det', 'seg' or 'cls', got {task!r}")
