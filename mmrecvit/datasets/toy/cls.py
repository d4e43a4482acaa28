"""The toy classification set: one toy shape per image, written in ImageNet's folder layout.

``make_toy_cls(root)`` writes what mmpretrain's `ImageNet` (``split='train'`` / ``'val'``) and
`CustomDataset` (``data_prefix='train'``) read unchanged::

    train/circle/train_000000.jpg ...     val/circle/val_000000.jpg ...

Each image is a crop around one shape of the toy COCO set, drawn as toy COCO draws its instances
(`coco.shape_mask`, `coco.class_colour`, the background texture and the shading), on a ``size`` x
``size`` canvas. The classes are toy COCO's 5 classes, each in its jittered palette colour, so
the backbone a classifier pretrains here knows the classes of the toy Mask R-CNN it is
transferred to (``tools/demo.py --task transfer``). Why colour: with classes that only the shape
tells apart (5 shapes x 2 colour groups of random hues, 10 classes), a from-scratch ViT-Ti stayed
at what colour alone gives (22 % top-1, chance 10 %) after 600 iterations of batch 32 at 96 px,
as the toy detector did with shapes alone (`coco.class_colour`).

`TOY_CLS_CLASSES` lists the classes in sorted order, which is the class index mmpretrain gives
each folder (it sorts them, as ImageNet's synset ids). Image ``i`` of a split has class ``i % 5``,
so every class gets ``num // 5`` or one more images.
"""

from __future__ import annotations

import numpy as np

from .coco import TOY_COCO_CLASSES, background, class_colour, paint_shape, shape_mask
from .draw import encode_jpg, finish, rng_for
from .manifest import PathLike, ToyDataResult, check_args, generate_images

TOY_CLS_DIR = 'toy_cls'
"""Where `make_toy_data` puts this set under its root: the ``data_root`` of the toy cls configs."""

TOY_CLS_CLASSES: tuple[str, ...] = tuple(sorted(TOY_COCO_CLASSES))
"""Class names = folder names, in mmpretrain's (sorted) class-index order."""

RADIUS_RANGE = (0.22, 0.4)
"""Shape radii as fractions of the image side: at 64 px, 14..26 px (toy COCO's objects are 13..51 px
at 256 px, so a crop shows one at roughly the scale the detector sees it)."""

_SPLITS = ('train', 'val')
_OWNED = _SPLITS  # the folders a rewrite empties


def class_of(index: int) -> int:
    """The class (index into `TOY_CLS_CLASSES`) of image ``index`` of a split: a round robin."""
    return index % len(TOY_CLS_CLASSES)


def render_cls_image(rng: np.random.Generator, label: int, size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Draw one image of class ``TOY_CLS_CLASSES[label]``: returns ``(image (size, size, 3) uint8 RGB,
    shape mask (size, size) bool)``.

    The shape's centre is drawn from the middle half of the room its radius leaves, so the whole
    shape is in the frame; it is rotated at random and painted in its class's colour.
    """
    coco_label = TOY_COCO_CLASSES.index(TOY_CLS_CLASSES[label])
    r = size * float(rng.uniform(*RADIUS_RANGE))
    cx, cy = (size / 2 + rng.uniform(-0.5, 0.5, 2) * (size / 2 - r)).tolist()
    mask = shape_mask(coco_label, size, cx, cy, r, rng.uniform(0, 2 * np.pi), rng)
    img = background(rng, size)
    paint_shape(img, mask, class_colour(rng, coco_label), (cx, cy), r, rng)
    return finish(img, rng, sigma=5.0), mask


def _files(split: str, index: int) -> list[str]:
    """Image ``index`` of ``split``, relative to the set's root."""
    return [f'{split}/{TOY_CLS_CLASSES[class_of(index)]}/{split}_{index:06d}.jpg']


def make_toy_cls(
    root: PathLike = f'data/{TOY_CLS_DIR}',
    num_train: int = 1000,
    num_val: int = 250,
    size: int = 64,
    seed: int = 0,
    force: bool = False,
    progress: bool = True,
) -> ToyDataResult:
    """Write (or find complete) a toy image-classification set under ``root``: the dataset root (a
    config's ``data_root``), which gets ``train/<class>/``, ``val/<class>/`` and the manifest.

    ``num_train`` and ``num_val`` must be >= 5 (every class needs an image, or mmpretrain finds fewer
    class folders than classes); the other arguments are `make_toy_coco`'s.
    """
    check_args(num_train, num_val, size, seed)
    for name, value in (('num_train', num_train), ('num_val', num_val)):
        if value < len(TOY_CLS_CLASSES):
            raise ValueError(f'{name} must be >= {len(TOY_CLS_CLASSES)} (one image per class), got {value}')

    def draw(split: str, index: int) -> list[bytes]:
        img, _ = render_cls_image(rng_for(seed, 'cls', split, index), class_of(index), size)
        return [encode_jpg(img)]

    folders = {split: [f'{split}/{name}' for name in TOY_CLS_CLASSES] for split in _SPLITS}
    args = dict(num_train=num_train, num_val=num_val, size=size, seed=seed)
    result = generate_images('cls', root, args, _OWNED, force, progress, folders, _files, draw)
    result.files = {split: result.root / split for split in _SPLITS}
    return result
