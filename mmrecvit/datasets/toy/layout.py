"""One data folder holding both toy sets, and the config overrides that point the toy configs at it."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .ade import TOY_ADE_DIR, make_toy_ade20k
from .coco import TOY_COCO_DIR, make_toy_coco
from .manifest import PathLike, ToyDataResult


def make_toy_data(root: PathLike = 'data', which: Sequence[str] = ('coco', 'ade'), seed: int = 0, size: int = 256,
                  coco_train: int = 200, coco_val: int = 50, ade_train: int = 120, ade_val: int = 30,
                  force: bool = False, progress: bool = True) -> dict[str, ToyDataResult]:
    """Write both toy sets under ``root``: ``root/toy_coco/`` and ``root/toy_ade/ADEChallengeData2016/``.

    ``which`` selects ``'coco'`` and/or ``'ade'``. Returns one `ToyDataResult` per set, keyed by kind.
    """
    unknown = set(which) - {'coco', 'ade'}
    if unknown:
        raise ValueError(f"which: unknown dataset(s) {sorted(unknown)}; allowed: 'coco', 'ade'")
    root = Path(root)
    out = {}
    if 'coco' in which:
        out['coco'] = make_toy_coco(root / TOY_COCO_DIR, coco_train, coco_val, size, seed, force=force,
                                    progress=progress)
    if 'ade' in which:
        out['ade'] = make_toy_ade20k(root / TOY_ADE_DIR, ade_train, ade_val, size, seed, force=force,
                                     progress=progress)
    return out


def toy_data_cfg(task: str, root: PathLike) -> dict[str, str]:
    """Config overrides (mmengine `--cfg-options` keys) that point a toy config at the toy sets in `root`.

    task: 'det' (toy COCO: dataset roots and the CocoMetric annotation file) or 'seg' (toy ADE20K).
    """
    if task == 'det':
        data_root = f'{root}/{TOY_COCO_DIR}/'
        ann = data_root + 'annotations/instances_val2017.json'
        return {**{f'{split}_dataloader.dataset.data_root': data_root for split in ('train', 'val', 'test')},
                'val_evaluator.ann_file': ann, 'test_evaluator.ann_file': ann}
    if task == 'seg':
        return {f'{split}_dataloader.dataset.data_root': f'{root}/{TOY_ADE_DIR}' for split in ('train', 'val', 'test')}
    raise ValueError(f"task must be 'det' or 'seg', got {task!r}")
