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
    size: int | None = None,
    coco_train: int | None = None,
    coco_val: int | None = None,
    ade_train: int | None = None,
    ade_val: int | None = None,
    cls_train: int | None = None,
    cls_val: int | None = None,
    cls_size: int | None = None,
    force: bool = False,
    progress: bool = True,
) -> dict[str, ToyDataResult]:
    """Write the toy sets under ``root``: ``root/toy_coco/``, ``root/toy_ade/ADEChallengeData2016/`` and
    ``root/toy_cls/``.

    ``which`` selects among ``'coco'``, ``'ade'`` and ``'cls'``. ``size`` is the side of the COCO and
    ADE20K images, ``cls_size`` that of the classification crops; a count or side left None is the set's own
    default (`make_toy_coco`, `make_toy_ade20k`, `make_toy_cls`: stated there once). Returns one `ToyDataResult`
    per set, keyed by kind.
    """
    unknown = set(which) - set(KINDS)
    if unknown:
        raise ValueError(f'which: unknown dataset(s) {sorted(unknown)}; allowed: {", ".join(map(repr, KINDS))}')
    sets = {  # kind: (its writer, its folder, (num_train, num_val, size) as given)
        'coco': (make_toy_coco, TOY_COCO_DIR, (coco_train, coco_val, size)),
        'ade': (make_toy_ade20k, TOY_ADE_DIR, (ade_train, ade_val, size)),
        'cls': (make_toy_cls, TOY_CLS_DIR, (cls_train, cls_val, cls_size)),
    }
    out = {}
    for kind in (k for k in KINDS if k in which):
        make, folder, given = sets[kind]
        sizes = {name: v for name, v in zip(('num_train', 'num_val', 'size'), given) if v is not None}
        out[kind] = make(Path(root) / folder, seed=seed, force=force, progress=progress, **sizes)
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
