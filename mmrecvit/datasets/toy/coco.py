"""The toy COCO set: shapes with occlusion on textured backgrounds, written in COCO's layout.

``make_toy_coco(root)`` writes what mmdet's `CocoDataset` reads unchanged::

    annotations/instances_train2017.json   annotations/instances_val2017.json
    train2017/000000000001.jpg ...         val2017/000001000001.jpg ...

Instance segmentation of `TOY_COCO_CLASSES` (category ids 1..5). Each class has its own colour
(`TOY_COCO_PALETTE`, jittered per instance) as well as its shape. Shapes occlude each other; each
annotation describes the *visible* part (RLE mask, area and bbox all from the same occlusion-aware
mask), ``iscrowd=0``. Instances less than `MIN_VISIBLE_FRACTION` visible are not drawn at all, so
an image never shows an unlabelled one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from pycocotools import mask as mask_utils
from tqdm import tqdm

from .draw import (
    encode_jpg,
    fbm,
    fill_circle,
    fill_ellipse,
    fill_poly,
    finish,
    hsv,
    pixel_grid,
    regular_polygon,
    rng_for,
)
from .manifest import TOY_DATA_VERSION, PathLike, ToyDataResult, check_args, generate

TOY_COCO_DIR = 'toy_coco'
"""Where `make_toy_data` puts this set under its root: the ``data_root`` of the toy det configs."""

TOY_COCO_CLASSES: tuple[str, ...] = ('circle', 'square', 'triangle', 'ellipse', 'star')
"""Class names, in category-id order (id = position + 1); pass as ``metainfo=dict(classes=...)``."""

TOY_COCO_PALETTE: list[tuple[int, int, int]] = [
    (220, 20, 60),
    (0, 130, 200),
    (60, 180, 75),
    (255, 225, 25),
    (145, 30, 180),
]
"""One RGB colour per `TOY_COCO_CLASSES` entry: the colour the generator paints that class's
instances with (jittered), and mmdet's ``metainfo=dict(palette=...)`` for drawing predictions."""

MIN_VISIBLE_FRACTION = 0.4
"""A toy COCO instance less visible than this (occluded or cut by the border) is not drawn."""

_SPLITS = {'train': 'train2017', 'val': 'val2017'}
_ID_OFFSET = {'train': 0, 'val': 1_000_000}  # image ids stay unique across the two splits
_OWNED = ('annotations', *_SPLITS.values())  # the folders a rewrite empties


@dataclass
class ToyCocoSample:
    """One rendered toy COCO image with its instances (front-most last)."""

    image: np.ndarray  # (H, W, 3) uint8 RGB
    labels: list[int]  # 0-based index into TOY_COCO_CLASSES
    full_masks: list[np.ndarray]  # (H, W) bool: the whole in-frame shape
    visible_masks: list[np.ndarray]  # (H, W) bool: the part not covered by later shapes


def shape_mask(
    label: int, size: int, cx: float, cy: float, r: float, angle: float, rng: np.random.Generator
) -> np.ndarray:
    """The full (in-frame) mask of one shape of class ``TOY_COCO_CLASSES[label]`` of radius ``r``."""
    m = np.zeros((size, size), np.uint8)
    name = TOY_COCO_CLASSES[label]
    if name == 'circle':
        fill_circle(m, cx, cy, r)
    elif name == 'square':
        fill_poly(m, regular_polygon(cx, cy, [r] * 4, angle))
    elif name == 'triangle':
        # jittered vertex angles: triangles of varied shape, never degenerate
        t = angle + 2 * np.pi * np.arange(3) / 3 + rng.uniform(-0.25, 0.25, 3)
        fill_poly(m, np.stack([cx + r * np.cos(t), cy + r * np.sin(t)], axis=1))
    elif name == 'ellipse':
        fill_ellipse(m, cx, cy, r, r * rng.uniform(0.4, 0.62), np.degrees(angle))
    else:  # star: 5 outer and 5 inner vertices
        fill_poly(m, regular_polygon(cx, cy, [r, r * rng.uniform(0.38, 0.5)] * 5, angle))
    return m.astype(bool)


def background(rng: np.random.Generator, size: int) -> np.ndarray:
    """Low-saturation two-colour fractal texture, sometimes with stripes and clutter lines."""
    c1 = hsv(rng.random(), rng.uniform(0.0, 0.35), rng.uniform(0.25, 0.85))
    c2 = hsv(rng.random(), rng.uniform(0.0, 0.35), rng.uniform(0.25, 0.85))
    n = fbm(rng, size, size)[..., None]
    img = c1 * (1 - n) + c2 * n
    if rng.random() < 0.5:  # stripes of random frequency and direction
        yy, xx = pixel_grid(size)
        theta, freq = rng.uniform(0, np.pi), rng.uniform(0.05, 0.25)
        img += (12 * np.sin(freq * (xx * np.cos(theta) + yy * np.sin(theta))))[..., None]
    if rng.random() < 0.5:  # clutter: thin straight lines that are not objects
        for _ in range(rng.integers(2, 7)):
            p0, p1 = rng.uniform(0, size, 2), rng.uniform(0, size, 2)
            colour = tuple(float(c) for c in hsv(rng.random(), rng.uniform(0, 0.4), rng.uniform(0.2, 0.9)))
            cv2.line(img, (int(p0[0]), int(p0[1])), (int(p1[0]), int(p1[1])), colour, int(rng.integers(1, 3)))
    return img.astype(np.float32)


def class_colour(rng: np.random.Generator, label: int) -> np.ndarray:
    """An instance's colour: its class's `TOY_COCO_PALETTE` colour, brightness and tint jittered.

    Class identity is carried by colour as well as by shape, so a detector trained from scratch
    learns the classes within the demo's few minutes on a CPU; with a random colour per instance,
    i.e. shapes alone, it did not. The masks still need the shapes.
    """
    base = np.asarray(TOY_COCO_PALETTE[label], np.float32)
    return np.clip(base * rng.uniform(0.8, 1.15) + rng.normal(0.0, 8.0, 3), 0, 255).astype(np.float32)


def paint_shape(
    img: np.ndarray,
    mask: np.ndarray,
    colour: np.ndarray,
    centre: tuple[float, float],
    radius: float,
    rng: np.random.Generator,
) -> None:
    """Paint ``colour`` into ``img`` through ``mask`` with a linear shading across the shape plus fine
    noise, so shapes are not flat colour blobs."""
    yy, xx = pixel_grid(img.shape[0])
    t = rng.uniform(0, 2 * np.pi)
    ramp = (np.cos(t) * (xx[mask] - centre[0]) + np.sin(t) * (yy[mask] - centre[1])) / radius
    shade = 1.0 + 0.18 * ramp + 0.06 * rng.standard_normal(ramp.shape, dtype=np.float32)
    img[mask] = colour[None, :] * shade[:, None]


def render_coco_image(
    rng: np.random.Generator,
    size: int = 256,
    min_instances: int = 2,
    max_instances: int = 6,
    radius_range: Sequence[float] = (0.05, 0.2),
    occlusion_prob: float = 0.5,
) -> ToyCocoSample:
    """Draw one toy COCO image: ``min_instances``..``max_instances`` shapes on a textured background.

    Shape radii are log-uniform in ``radius_range`` (fractions of ``size``; at 256 px the default
    gives 13..51 px, i.e. COCO "small" to "large" objects). Shapes are drawn back to front. With
    probability ``occlusion_prob`` a shape is placed so that
    it overlaps an earlier one. Visibility is decided front to back, so an instance that is less
    than `MIN_VISIBLE_FRACTION` visible is dropped before drawing and never covers anything.
    """
    min_area = max(16.0, 80.0 * (size / 256) ** 2)
    for _attempt in range(50):
        n = int(rng.integers(min_instances, max_instances + 1))
        labels, fulls, centres, radii = [], [], [], []
        for k in range(n):
            label = int(rng.integers(len(TOY_COCO_CLASSES)))
            r = size * float(np.exp(rng.uniform(np.log(radius_range[0]), np.log(radius_range[1]))))
            if k > 0 and rng.random() < occlusion_prob:
                j = int(rng.integers(k))
                t = rng.uniform(0, 2 * np.pi)
                dist = (radii[j] + r) * rng.uniform(0.3, 0.75)
                cx, cy = centres[j][0] + dist * np.cos(t), centres[j][1] + dist * np.sin(t)
            else:
                cx, cy = rng.uniform(0.5 * r, size - 0.5 * r, 2)
            cx, cy = float(np.clip(cx, 0.3 * r, size - 0.3 * r)), float(np.clip(cy, 0.3 * r, size - 0.3 * r))
            labels.append(label)
            fulls.append(shape_mask(label, size, cx, cy, r, rng.uniform(0, 2 * np.pi), rng))
            centres.append((cx, cy))
            radii.append(r)
        covered = np.zeros((size, size), bool)
        keep = [False] * n
        visible: list[np.ndarray | None] = [None] * n
        for k in reversed(range(n)):  # front to back
            full_area = int(fulls[k].sum())
            vis = fulls[k] & ~covered
            area = int(vis.sum())
            if full_area > 0 and area >= min_area and area >= MIN_VISIBLE_FRACTION * full_area:
                keep[k], visible[k] = True, vis
                covered |= fulls[k]
        if sum(keep) >= min_instances:
            break
    else:  # pragma: no cover - 50 failures in a row do not happen with the default ranges
        raise RuntimeError(f'could not place {min_instances} visible instances on a {size}px image')

    img = background(rng, size)
    out = ToyCocoSample(image=np.empty(0), labels=[], full_masks=[], visible_masks=[])
    for k in range(n):
        if not keep[k]:
            continue
        paint_shape(img, fulls[k], class_colour(rng, labels[k]), centres[k], radii[k], rng)
        out.labels.append(labels[k])
        out.full_masks.append(fulls[k])
        out.visible_masks.append(visible[k])
    out.image = finish(img, rng, sigma=5.0)
    return out


def _annotations(sample: ToyCocoSample, image_id: int, first_ann_id: int) -> list[dict[str, Any]]:
    """COCO annotation dicts of one sample's visible masks (RLE, area and bbox from the same mask)."""
    anns = []
    for i, (label, vis) in enumerate(zip(sample.labels, sample.visible_masks)):
        rle = mask_utils.encode(np.asfortranarray(vis.astype(np.uint8)))
        anns.append(
            {
                'id': first_ann_id + i,
                'image_id': image_id,
                'category_id': label + 1,
                'segmentation': {'size': [int(s) for s in rle['size']], 'counts': rle['counts'].decode('ascii')},
                'area': float(mask_utils.area(rle)),
                'bbox': [float(v) for v in mask_utils.toBbox(rle)],
                'iscrowd': 0,
            }
        )
    return anns


def _file_name(split: str, index: int) -> str:
    return f'{_ID_OFFSET[split] + index + 1:012d}.jpg'


def _expected_paths(num_train: int, num_val: int) -> list[str]:
    """The relative paths a complete toy COCO set has."""
    paths = []
    for split, n in (('train', num_train), ('val', num_val)):
        paths.append(f'annotations/instances_{_SPLITS[split]}.json')
        paths += [f'{_SPLITS[split]}/{_file_name(split, i)}' for i in range(n)]
    return paths


def _write_split(
    root: Path,
    split: str,
    num: int,
    size: int,
    seed: int,
    min_instances: int,
    max_instances: int,
    radius_range: Sequence[float],
    progress: bool,
) -> Path:
    img_dir = root / _SPLITS[split]
    img_dir.mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for i in tqdm(range(num), desc=f'toy COCO {_SPLITS[split]}', unit='img', disable=not progress):
        sample = render_coco_image(rng_for(seed, 'coco', split, i), size, min_instances, max_instances, radius_range)
        image_id = _ID_OFFSET[split] + i + 1
        name = _file_name(split, i)
        (img_dir / name).write_bytes(encode_jpg(sample.image))
        images.append({'id': image_id, 'file_name': name, 'height': size, 'width': size})
        annotations += _annotations(sample, image_id, len(annotations) + 1)
    coco = {
        'info': {
            'description': f'mmrecvit toy COCO ({split}), generator v{TOY_DATA_VERSION}, seed {seed}',
            'version': str(TOY_DATA_VERSION),
            'year': 2017,
        },
        'licenses': [],
        'images': images,
        'annotations': annotations,
        'categories': [
            {'id': i + 1, 'name': name, 'supercategory': 'shape'} for i, name in enumerate(TOY_COCO_CLASSES)
        ],
    }
    ann_file = root / 'annotations' / f'instances_{_SPLITS[split]}.json'
    ann_file.parent.mkdir(parents=True, exist_ok=True)
    ann_file.write_text(json.dumps(coco, separators=(',', ':')))
    return ann_file


def make_toy_coco(
    root: PathLike = f'data/{TOY_COCO_DIR}',
    num_train: int = 200,
    num_val: int = 50,
    size: int = 256,
    seed: int = 0,
    min_instances: int = 2,
    max_instances: int = 6,
    radius_range: Sequence[float] = (0.05, 0.2),
    force: bool = False,
    progress: bool = True,
) -> ToyDataResult:
    """Write (or find complete) a toy COCO instance-segmentation set under ``root``.

    Args:
        root: the dataset root (a config's ``data_root``); gets ``annotations/``, ``train2017/``,
            ``val2017/`` and the manifest.
        num_train, num_val: images per split.
        size: square image side in pixels (>= 64).
        seed: the seed every image's generator derives from.
        min_instances, max_instances: visible instances per image (inclusive range).
        radius_range: shape radii as fractions of ``size`` (log-uniform between the two).
        force: regenerate even when an identical complete set is present, and overwrite a
            non-empty ``root`` that this generator did not write.
        progress: show a tqdm progress bar.
    """
    check_args(num_train, num_val, size, seed)
    if not 1 <= min_instances <= max_instances:
        raise ValueError(f'need 1 <= min_instances <= max_instances, got {min_instances}, {max_instances}')
    radius_range = [float(v) for v in radius_range]  # a list: it is compared with the manifest's JSON
    if len(radius_range) != 2 or not 0 < radius_range[0] <= radius_range[1] <= 0.5:
        raise ValueError(f'radius_range must be (low, high) with 0 < low <= high <= 0.5, got {radius_range}')
    args = dict(
        num_train=num_train,
        num_val=num_val,
        size=size,
        seed=seed,
        min_instances=min_instances,
        max_instances=max_instances,
        radius_range=radius_range,
    )

    def write(r: Path) -> None:
        for split, n in (('train', num_train), ('val', num_val)):
            _write_split(r, split, n, size, seed, min_instances, max_instances, radius_range, progress)

    result = generate('coco', root, args, _expected_paths(num_train, num_val), _OWNED, force, write)
    result.files = {f'{s}_ann': result.root / 'annotations' / f'instances_{d}.json' for s, d in _SPLITS.items()}
    result.files.update({f'{s}_img': result.root / d for s, d in _SPLITS.items()})
    return result
