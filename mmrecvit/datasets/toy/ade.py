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

from .ade_scene import TOY_ADE_LABELS, render_ade_image
from .draw import encode_jpg, encode_png, rng_for
from .manifest import PathLike, ToyDataResult, check_args, generate_images

TOY_ADE_DIR = 'toy_ade/ADEChallengeData2016'
"""Where `make_toy_data` puts this set under its root: the ``data_root`` of the toy seg configs."""

TOY_ADE_CLASSES: tuple[str, ...] = tuple(TOY_ADE_LABELS)
TOY_ADE_MMSEG_INDICES: tuple[int, ...] = tuple(v - 1 for v in TOY_ADE_LABELS.values())
"""The classes' indices among mmseg's 150 ADE20K classes (after ``reduce_zero_label``)."""

_SPLITS = {'train': 'training', 'val': 'validation'}
_OWNED = ('images', 'annotations')  # the folders a rewrite empties


def _file_stem(split: str, index: int) -> str:
    return f'ADE_{split}_{index + 1:08d}'


def _files(split: str, index: int) -> list[str]:
    """Image ``index`` of ``split``: its JPEG and its label map, relative to the set's root."""
    folder, stem = _SPLITS[split], _file_stem(split, index)
    return [f'images/{folder}/{stem}.jpg', f'annotations/{folder}/{stem}.png']


def make_toy_ade20k(
    root: PathLike = f'data/{TOY_ADE_DIR}',
    num_train: int = 120,
    num_val: int = 30,
    size: int = 256,
    seed: int = 0,
    force: bool = False,
    progress: bool = True,
) -> ToyDataResult:
    """Write (or find complete) a toy ADE20K semantic-segmentation set under ``root``: the
    ``ADEChallengeData2016`` folder itself (a config's ``data_root``), which gets
    ``images/{training,validation}/*.jpg``, ``annotations/{training,validation}/*.png`` and the
    manifest. The other arguments are `make_toy_coco`'s.
    """
    check_args(num_train, num_val, size, seed)

    def draw(split: str, index: int) -> list[bytes]:
        img, lab = render_ade_image(rng_for(seed, 'ade', split, index), size)
        return [encode_jpg(img), encode_png(lab)]

    folders = {s: [f'images/{d}', f'annotations/{d}'] for s, d in _SPLITS.items()}
    args = dict(num_train=num_train, num_val=num_val, size=size, seed=seed)
    result = generate_images('ade', root, args, _OWNED, force, progress, folders, _files, draw)
    result.files = {f'{s}_{k}': result.root / k / d for s, d in _SPLITS.items() for k in ('images', 'annotations')}
    return result
