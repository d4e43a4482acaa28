"""The toy ADE20K set: outdoor scenes and their label maps, written in ADE20K's layout.

``make_toy_ade20k(root)`` writes what mmseg's `ADE20KDataset` reads unchanged::

    images/training/ADE_train_00000001.jpg        annotations/training/ADE_train_00000001.png
    images/validation/ADE_val_00000001.jpg        annotations/validation/ADE_val_00000001.png

Scenes of sky, mountains, buildings, grass, road, trees, cars and people. The label maps are
single-channel uint8 PNGs in ADE20K's own index space: 0 = "other"/ignore (also used for
unlabelled clutter such as poles and signs) and the `TOY_ADE_LABELS` values, ADE20K's 1-based
objectInfo150 indices. mmseg's `ADE20KDataset` (``reduce_zero_label=True``) maps value ``v`` to
its class ``v - 1`` and 0 to 255 (ignored).
"""

from __future__ import annotations

from pathlib import Path

from tqdm import tqdm

from .ade_scene import TOY_ADE_LABELS, render_ade_image
from .draw import encode_jpg, encode_png, rng_for
from .manifest import PathLike, ToyDataResult, check_args, generate

TOY_ADE_DIR = 'toy_ade/ADEChallengeData2016'
"""Where `make_toy_data` puts this set under its root: the ``data_root`` of the toy seg configs."""

TOY_ADE_CLASSES: tuple[str, ...] = tuple(TOY_ADE_LABELS)
TOY_ADE_MMSEG_INDICES: tuple[int, ...] = tuple(v - 1 for v in TOY_ADE_LABELS.values())
"""The classes' indices among mmseg's 150 ADE20K classes (after ``reduce_zero_label``)."""

_SPLITS = {'train': 'training', 'val': 'validation'}
_OWNED = ('images', 'annotations')  # the folders a rewrite empties


def _file_stem(split: str, index: int) -> str:
    return f'ADE_{split}_{index + 1:08d}'


def _expected_paths(num_train: int, num_val: int) -> list[str]:
    """The relative paths a complete toy ADE20K set has."""
    paths = []
    for split, n in (('train', num_train), ('val', num_val)):
        for i in range(n):
            paths += [
                f'images/{_SPLITS[split]}/{_file_stem(split, i)}.jpg',
                f'annotations/{_SPLITS[split]}/{_file_stem(split, i)}.png',
            ]
    return paths


def make_toy_ade20k(
    root: PathLike = f'data/{TOY_ADE_DIR}',
    num_train: int = 120,
    num_val: int = 30,
    size: int = 256,
    seed: int = 0,
    force: bool = False,
    progress: bool = True,
) -> ToyDataResult:
    """Write (or find complete) a toy ADE20K semantic-segmentation set under ``root``.

    Args:
        root: the ``ADEChallengeData2016`` folder itself (a config's ``data_root``); gets
            ``images/{training,validation}/*.jpg``, ``annotations/{training,validation}/*.png``
            and the manifest.
        num_train, num_val: images per split.
        size: square image side in pixels (>= 64).
        seed: the seed every image's generator derives from.
        force: as in `make_toy_coco`.
        progress: show a tqdm progress bar.
    """
    check_args(num_train, num_val, size, seed)
    args = dict(num_train=num_train, num_val=num_val, size=size, seed=seed)

    def write(r: Path) -> None:
        for split, n in (('train', num_train), ('val', num_val)):
            img_dir, ann_dir = r / 'images' / _SPLITS[split], r / 'annotations' / _SPLITS[split]
            img_dir.mkdir(parents=True, exist_ok=True)
            ann_dir.mkdir(parents=True, exist_ok=True)
            for i in tqdm(range(n), desc=f'toy ADE20K {_SPLITS[split]}', unit='img', disable=not progress):
                img, lab = render_ade_image(rng_for(seed, 'ade', split, i), size)
                (img_dir / f'{_file_stem(split, i)}.jpg').write_bytes(encode_jpg(img))
                (ann_dir / f'{_file_stem(split, i)}.png').write_bytes(encode_png(lab))

    result = generate('ade', root, args, _expected_paths(num_train, num_val), _OWNED, force, write)
    result.files = {f'{s}_{k}': result.root / k / d for s, d in _SPLITS.items() for k in ('images', 'annotations')}
    return result
