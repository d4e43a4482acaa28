"""The embedded toy COCO / ADE20K generator (issue 3, "Embedded toy datasets").

COCO and ADE20K cannot be downloaded on the project's machines, so the demo and the end-to-end
tests train on small synthetic sets written in the *real* on-disk layouts, which mmdet's
`CocoDataset` and mmseg's `ADE20KDataset` read unchanged:

toy COCO (`make_toy_coco`, default ``data/toy_coco/``)::

    annotations/instances_train2017.json   annotations/instances_val2017.json
    train2017/000000000001.jpg ...         val2017/000001000001.jpg ...

  Instance segmentation of `TOY_COCO_CLASSES` (category ids 1..5) on textured backgrounds.
  Each class has its own colour (`TOY_COCO_PALETTE`, jittered per instance) as well as its shape.
  Shapes occlude each other; each annotation describes the *visible* part (RLE mask, area, bbox
  all from the same occlusion-aware mask), ``iscrowd=0``. Instances less than
  `MIN_VISIBLE_FRACTION` visible are not drawn at all, so the image never shows an unlabelled one.

toy ADE20K (`make_toy_ade20k`, default ``data/toy_ade/ADEChallengeData2016/``)::

    images/training/ADE_train_00000001.jpg        annotations/training/ADE_train_00000001.png
    images/validation/ADE_val_00000001.jpg        annotations/validation/ADE_val_00000001.png

  Outdoor scenes (sky, mountains, buildings, grass, road, trees, cars, people) whose label maps
  are single-channel uint8 PNGs in ADE20K's own index space: 0 = "other"/ignore (also used for
  unlabelled clutter such as poles and signs) and `TOY_ADE_LABELS` values, ADE20K's 1-based
  objectInfo150 indices. mmseg's `ADE20KDataset` (``reduce_zero_label=True``) maps value ``v``
  to its class ``v - 1`` and 0 to 255 (ignored).

Every image is drawn from its own random generator, seeded by ``(seed, dataset, split, index)``,
so a file depends only on the seed, its split and its index (not on the other counts), and the
same seed gives byte-identical files. Each dataset root gets a small `MANIFEST_NAME` file that
records the generator version and arguments; a later call with the same arguments finds the set
complete and skips it.

This module imports only numpy, OpenCV, pycocotools and tqdm (and has no relative imports), so
`tools/misc/make_toy_data.py` can load it without importing torch, mmdet or mmseg.
"""
from __future__ import annotations

import colorsys
import json
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Union

import cv2
import numpy as np
from pycocotools import mask as mask_utils
from tqdm import tqdm

PathLike = Union[str, Path]

# Bump whenever the output for a given seed/arguments changes: existing sets then regenerate.
TOY_DATA_VERSION = 3
MANIFEST_NAME = 'toy_manifest.json'

# Where `make_toy_data(root)` puts each set, relative to `root`; these are the `data_root`s of
# the toy configs.
TOY_COCO_DIR = 'toy_coco'
TOY_ADE_DIR = 'toy_ade/ADEChallengeData2016'

# ---------------------------------------------------------------------------------------------
# Class tables
# ---------------------------------------------------------------------------------------------
TOY_COCO_CLASSES: tuple[str, ...] = ('circle', 'square', 'triangle', 'ellipse', 'star')
"""Class names, in category-id order (id = position + 1); pass as ``metainfo=dict(classes=...)``."""

TOY_COCO_PALETTE: list[tuple[int, int, int]] = [
    (220, 20, 60), (0, 130, 200), (60, 180, 75), (255, 225, 25), (145, 30, 180)]
"""One RGB colour per `TOY_COCO_CLASSES` entry: the colour the generator paints that class's
instances with (jittered), and mmdet's ``metainfo=dict(palette=...)`` for drawing predictions."""

TOY_ADE_LABELS: dict[str, int] = {
    'building': 2, 'sky': 3, 'tree': 5, 'road': 7, 'grass': 10, 'person': 13, 'mountain': 17, 'car': 21}
"""Region classes -> value written in the label PNG = ADE20K's 1-based objectInfo150 index
(mmseg's ADE20K class index is ``value - 1``). Every other pixel is 0 ("other", ignored)."""

TOY_ADE_CLASSES: tuple[str, ...] = tuple(TOY_ADE_LABELS)
TOY_ADE_MMSEG_INDICES: tuple[int, ...] = tuple(v - 1 for v in TOY_ADE_LABELS.values())
"""The classes' indices among mmseg's 150 ADE20K classes (after ``reduce_zero_label``)."""

MIN_VISIBLE_FRACTION = 0.4
"""A toy COCO instance less visible than this (occluded or cut by the border) is not drawn."""

_COCO_SPLITS = {'train': 'train2017', 'val': 'val2017'}
_COCO_ID_OFFSET = {'train': 0, 'val': 1_000_000}  # image ids stay unique across the two splits
_ADE_SPLITS = {'train': 'training', 'val': 'validation'}
_KIND_CODE = {'coco': 0, 'ade': 1}
_SPLIT_CODE = {'train': 0, 'val': 1}


@dataclass
class ToyDataResult:
    """What one `make_toy_coco` / `make_toy_ade20k` call did."""

    kind: str                     # 'coco' or 'ade'
    root: Path                    # the dataset root (a config's ``data_root``)
    num_train: int
    num_val: int
    size: int
    seconds: float                # wall time of the call
    skipped: bool                 # True: an identical complete set was already there
    files: dict[str, Path] = field(default_factory=dict)  # main paths, for summaries


@dataclass
class ToyCocoSample:
    """One rendered toy COCO image with its instances (front-most last)."""

    image: np.ndarray             # (H, W, 3) uint8 RGB
    labels: list[int]             # 0-based index into TOY_COCO_CLASSES
    full_masks: list[np.ndarray]  # (H, W) bool: the whole in-frame shape
    visible_masks: list[np.ndarray]  # (H, W) bool: the part not covered by later shapes


# ---------------------------------------------------------------------------------------------
# Small drawing helpers (RGB float32 images in 0..255, bool/uint8 masks)
# ---------------------------------------------------------------------------------------------
def _rng_for(seed: int, kind: str, split: str, index: int) -> np.random.Generator:
    """The generator of one image: independent of the counts and of every other image."""
    return np.random.default_rng(np.random.SeedSequence([seed, _KIND_CODE[kind], _SPLIT_CODE[split], index]))


def _smooth_noise(rng: np.random.Generator, h: int, w: int, cells: int) -> np.ndarray:
    """Value noise: a ``cells``-wide random grid upsampled bicubically, scaled to 0..1."""
    grid = rng.random((cells, cells), dtype=np.float32)
    field_ = cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC)
    lo, hi = float(field_.min()), float(field_.max())
    return (field_ - lo) / max(hi - lo, 1e-6)


def _fbm(rng: np.random.Generator, h: int, w: int, octaves: Sequence[int] = (3, 6, 12, 24)) -> np.ndarray:
    """Fractal noise (sum of value-noise octaves with halving weights), scaled to 0..1."""
    total = np.zeros((h, w), np.float32)
    weight = 1.0
    for cells in octaves:
        total += weight * _smooth_noise(rng, h, w, cells)
        weight *= 0.5
    lo, hi = float(total.min()), float(total.max())
    return (total - lo) / max(hi - lo, 1e-6)


def _hsv(h: float, s: float, v: float) -> np.ndarray:
    """HSV in 0..1 -> RGB float32 in 0..255."""
    return np.array(colorsys.hsv_to_rgb(h % 1.0, s, v), np.float32) * 255.0


def _fill_poly(mask: np.ndarray, pts: np.ndarray) -> None:
    """Fill one polygon given in float pixel coordinates (sub-pixel precise, not antialiased)."""
    cv2.fillPoly(mask, [np.round(np.asarray(pts) * 16).astype(np.int32)], 1, cv2.LINE_8, 4)


def _fill_circle(mask: np.ndarray, cx: float, cy: float, r: float) -> None:
    cv2.circle(mask, (round(cx * 16), round(cy * 16)), max(round(r * 16), 16), 1, -1, cv2.LINE_8, 4)


def _fill_ellipse(mask: np.ndarray, cx: float, cy: float, a: float, b: float, angle_deg: float) -> None:
    cv2.ellipse(mask, (round(cx * 16), round(cy * 16)), (max(round(a * 16), 16), max(round(b * 16), 16)),
                angle_deg, 0, 360, 1, -1, cv2.LINE_8, 4)


def _fill_rect(mask: np.ndarray, x0: float, y0: float, x1: float, y1: float) -> None:
    """Fill the axis-aligned box [x0, x1) x [y0, y1), clipped to the mask."""
    h, w = mask.shape
    xa, xb = max(int(round(x0)), 0), min(int(round(x1)), w)
    ya, yb = max(int(round(y0)), 0), min(int(round(y1)), h)
    if xb > xa and yb > ya:
        mask[ya:yb, xa:xb] = 1


def _regular_polygon(cx: float, cy: float, radii: Sequence[float], angle: float) -> np.ndarray:
    """Vertices at the given radii, evenly spaced in angle, rotated by ``angle`` (radians)."""
    k = len(radii)
    t = angle + 2 * np.pi * np.arange(k) / k
    return np.stack([cx + np.asarray(radii) * np.cos(t), cy + np.asarray(radii) * np.sin(t)], axis=1)


def _encode_jpg(rgb: np.ndarray, quality: int = 90) -> bytes:
    ok, buf = cv2.imencode('.jpg', np.ascontiguousarray(rgb[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok, 'cv2.imencode failed for a JPEG'
    return buf.tobytes()


def _encode_png(gray: np.ndarray) -> bytes:
    ok, buf = cv2.imencode('.png', np.ascontiguousarray(gray), [cv2.IMWRITE_PNG_COMPRESSION, 3])
    assert ok, 'cv2.imencode failed for a PNG'
    return buf.tobytes()


def _finish(img: np.ndarray, rng: np.random.Generator, sigma: float) -> np.ndarray:
    """Sensor-like pixel noise and a global gain, then uint8."""
    gain = rng.uniform(0.9, 1.1)
    noise = rng.standard_normal(img.shape, dtype=np.float32) * sigma
    return np.clip(img * gain + noise, 0, 255).astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# Toy COCO: shapes with occlusion
# ---------------------------------------------------------------------------------------------
def _shape_mask(label: int, size: int, cx: float, cy: float, r: float, angle: float,
                rng: np.random.Generator) -> np.ndarray:
    """The full (in-frame) mask of one shape of class ``TOY_COCO_CLASSES[label]`` of radius ``r``."""
    m = np.zeros((size, size), np.uint8)
    name = TOY_COCO_CLASSES[label]
    if name == 'circle':
        _fill_circle(m, cx, cy, r)
    elif name == 'square':
        _fill_poly(m, _regular_polygon(cx, cy, [r] * 4, angle))
    elif name == 'triangle':
        # jittered vertex angles: triangles of varied shape, never degenerate
        t = angle + 2 * np.pi * np.arange(3) / 3 + rng.uniform(-0.25, 0.25, 3)
        _fill_poly(m, np.stack([cx + r * np.cos(t), cy + r * np.sin(t)], axis=1))
    elif name == 'ellipse':
        _fill_ellipse(m, cx, cy, r, r * rng.uniform(0.4, 0.62), np.degrees(angle))
    else:  # star: 5 outer and 5 inner vertices
        _fill_poly(m, _regular_polygon(cx, cy, [r, r * rng.uniform(0.38, 0.5)] * 5, angle))
    return m.astype(bool)


def _coco_background(rng: np.random.Generator, size: int) -> np.ndarray:
    """Low-saturation two-colour fractal texture, sometimes with stripes and clutter lines."""
    c1 = _hsv(rng.random(), rng.uniform(0.0, 0.35), rng.uniform(0.25, 0.85))
    c2 = _hsv(rng.random(), rng.uniform(0.0, 0.35), rng.uniform(0.25, 0.85))
    n = _fbm(rng, size, size)[..., None]
    img = c1 * (1 - n) + c2 * n
    if rng.random() < 0.5:  # stripes of random frequency and direction
        yy, xx = _grid(size)
        theta, freq = rng.uniform(0, np.pi), rng.uniform(0.05, 0.25)
        img += (12 * np.sin(freq * (xx * np.cos(theta) + yy * np.sin(theta))))[..., None]
    if rng.random() < 0.5:  # clutter: thin straight lines that are not objects
        for _ in range(rng.integers(2, 7)):
            p0, p1 = rng.uniform(0, size, 2), rng.uniform(0, size, 2)
            colour = tuple(float(c) for c in _hsv(rng.random(), rng.uniform(0, 0.4), rng.uniform(0.2, 0.9)))
            cv2.line(img, (int(p0[0]), int(p0[1])), (int(p1[0]), int(p1[1])), colour, int(rng.integers(1, 3)))
    return img.astype(np.float32)


@lru_cache(maxsize=4)
def _grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column coordinates of a ``size`` x ``size`` image (float32, read-only)."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    yy.flags.writeable = False
    xx.flags.writeable = False
    return yy, xx


def _class_colour(rng: np.random.Generator, label: int) -> np.ndarray:
    """An instance's colour: its class's `TOY_COCO_PALETTE` colour, brightness and tint jittered.

    Class identity is carried by colour as well as by shape, so a detector trained from scratch
    learns the classes within the demo's few minutes on a CPU; with a random colour per instance
    (generator v2), i.e. shapes alone, it did not. The masks still need the shapes.
    """
    base = np.asarray(TOY_COCO_PALETTE[label], np.float32)
    return np.clip(base * rng.uniform(0.8, 1.15) + rng.normal(0.0, 8.0, 3), 0, 255).astype(np.float32)


def render_coco_image(rng: np.random.Generator, size: int = 256, min_instances: int = 2,
                      max_instances: int = 6, radius_range: Sequence[float] = (0.05, 0.2),
                      occlusion_prob: float = 0.5) -> ToyCocoSample:
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
            fulls.append(_shape_mask(label, size, cx, cy, r, rng.uniform(0, 2 * np.pi), rng))
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

    img = _coco_background(rng, size)
    yy, xx = _grid(size)
    out = ToyCocoSample(image=np.empty(0), labels=[], full_masks=[], visible_masks=[])
    for k in range(n):
        if not keep[k]:
            continue
        colour = _class_colour(rng, labels[k])
        # a linear shading across the shape plus fine noise, so shapes are not flat colour blobs
        t = rng.uniform(0, 2 * np.pi)
        m = fulls[k]
        ramp = (np.cos(t) * (xx[m] - centres[k][0]) + np.sin(t) * (yy[m] - centres[k][1])) / radii[k]
        shade = 1.0 + 0.18 * ramp + 0.06 * rng.standard_normal(ramp.shape, dtype=np.float32)
        img[m] = colour[None, :] * shade[:, None]
        out.labels.append(labels[k])
        out.full_masks.append(m)
        out.visible_masks.append(visible[k])
    out.image = _finish(img, rng, sigma=5.0)
    return out


def _coco_annotations(sample: ToyCocoSample, image_id: int, first_ann_id: int) -> list[dict[str, Any]]:
    """COCO annotation dicts of one sample's visible masks (RLE, area and bbox from the same mask)."""
    anns = []
    for i, (label, vis) in enumerate(zip(sample.labels, sample.visible_masks)):
        rle = mask_utils.encode(np.asfortranarray(vis.astype(np.uint8)))
        anns.append({
            'id': first_ann_id + i,
            'image_id': image_id,
            'category_id': label + 1,
            'segmentation': {'size': [int(s) for s in rle['size']], 'counts': rle['counts'].decode('ascii')},
            'area': float(mask_utils.area(rle)),
            'bbox': [float(v) for v in mask_utils.toBbox(rle)],
            'iscrowd': 0,
        })
    return anns


def _coco_file_name(split: str, index: int) -> str:
    return f'{_COCO_ID_OFFSET[split] + index + 1:012d}.jpg'


def _coco_expected(num_train: int, num_val: int) -> list[str]:
    """The relative paths a complete toy COCO set has."""
    paths = []
    for split, n in (('train', num_train), ('val', num_val)):
        paths.append(f'annotations/instances_{_COCO_SPLITS[split]}.json')
        paths += [f'{_COCO_SPLITS[split]}/{_coco_file_name(split, i)}' for i in range(n)]
    return paths


def _write_coco_split(root: Path, split: str, num: int, size: int, seed: int, min_instances: int,
                      max_instances: int, radius_range: Sequence[float], progress: bool) -> Path:
    img_dir = root / _COCO_SPLITS[split]
    img_dir.mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for i in tqdm(range(num), desc=f'toy COCO {_COCO_SPLITS[split]}', unit='img', disable=not progress):
        sample = render_coco_image(_rng_for(seed, 'coco', split, i), size, min_instances, max_instances, radius_range)
        image_id = _COCO_ID_OFFSET[split] + i + 1
        name = _coco_file_name(split, i)
        (img_dir / name).write_bytes(_encode_jpg(sample.image))
        images.append({'id': image_id, 'file_name': name, 'height': size, 'width': size})
        annotations += _coco_annotations(sample, image_id, len(annotations) + 1)
    coco = {
        'info': {'description': f'mmrecvit toy COCO ({split}), generator v{TOY_DATA_VERSION}, seed {seed}',
                 'version': str(TOY_DATA_VERSION), 'year': 2017},
        'licenses': [],
        'images': images,
        'annotations': annotations,
        'categories': [{'id': i + 1, 'name': name, 'supercategory': 'shape'}
                       for i, name in enumerate(TOY_COCO_CLASSES)],
    }
    ann_file = root / 'annotations' / f'instances_{_COCO_SPLITS[split]}.json'
    ann_file.parent.mkdir(parents=True, exist_ok=True)
    ann_file.write_text(json.dumps(coco, separators=(',', ':')))
    return ann_file


# ---------------------------------------------------------------------------------------------
# Toy ADE20K: outdoor scenes
# ---------------------------------------------------------------------------------------------
class _Canvas:
    """An RGB float image and its ADE label map, painted together so they always agree."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.img = np.zeros((size, size, 3), np.float32)
        self.lab = np.zeros((size, size), np.uint8)

    def paint(self, mask: np.ndarray, colour: np.ndarray | float, label: int) -> None:
        """``colour``: an RGB triple or an (M, 3) texture restricted to ``mask`` (``tex[mask]``)."""
        m = mask.astype(bool, copy=False)
        self.img[m] = colour
        self.lab[m] = label

    def paint_rows(self, y0: int, y1: int, colour: np.ndarray, label: int, mask: np.ndarray | None = None) -> None:
        """Paint the band of rows ``y0:y1`` with a band texture (H', W, 3): all of it, or where the
        band-shaped ``mask`` (H', W) is set. Sky and ground need only their band, not the frame."""
        img, lab = self.img[y0:y1], self.lab[y0:y1]
        if mask is None:
            img[...] = colour
            lab[...] = label
        else:
            np.copyto(img, colour, where=mask[..., None])
            lab[mask] = label

    def new_mask(self) -> np.ndarray:
        """A blank uint8 mask for the cv2 drawing helpers (convert with ``.astype(bool)`` to combine)."""
        return np.zeros((self.size, self.size), np.uint8)


def _ade_sky(cv: _Canvas, rng: np.random.Generator, horizon: int) -> None:
    s = cv.size
    kind = rng.integers(3)
    if kind == 0:    # clear day
        top = _hsv(rng.uniform(0.55, 0.62), rng.uniform(0.5, 0.8), rng.uniform(0.7, 0.95))
        bottom = _hsv(rng.uniform(0.55, 0.6), rng.uniform(0.15, 0.35), 0.97)
    elif kind == 1:  # dusk
        top = _hsv(rng.uniform(0.6, 0.72), rng.uniform(0.4, 0.7), rng.uniform(0.35, 0.6))
        bottom = _hsv(rng.uniform(0.02, 0.1), rng.uniform(0.4, 0.7), rng.uniform(0.85, 1.0))
    else:            # overcast
        g = rng.uniform(0.6, 0.85)
        top, bottom = _hsv(0.6, 0.08, g), _hsv(0.6, 0.04, min(g + 0.1, 1.0))
    t = (np.arange(horizon, dtype=np.float32) / horizon)[:, None, None]
    sky = top * (1 - t) + bottom * t  # (horizon, 1, 3): a vertical gradient
    cloud = 0.85 * np.clip((_fbm(rng, horizon, s, (4, 8, 16, 32)) - rng.uniform(0.5, 0.7)) * 4, 0, 1)[..., None]
    cv.paint_rows(0, horizon, sky * (1 - cloud) + 245.0 * cloud, TOY_ADE_LABELS['sky'])


def _ade_mountains(cv: _Canvas, rng: np.random.Generator, horizon: int) -> None:
    s = cv.size
    yy, _ = _grid(s)
    coarse = cv2.resize(rng.random((1, int(rng.integers(3, 7))), dtype=np.float32), (s, 1),
                        interpolation=cv2.INTER_CUBIC)[0]
    fine = cv2.resize(rng.random((1, 24), dtype=np.float32), (s, 1), interpolation=cv2.INTER_LINEAR)[0]
    profile = np.clip(0.75 * coarse + 0.25 * fine, 0.05, 1.0)
    ridge = horizon - rng.uniform(0.1, 0.28) * s * profile
    mask = (yy >= ridge[None, :]) & (yy < horizon + 2)
    base = _hsv(rng.choice([0.08, 0.6, 0.75]) + rng.uniform(-0.03, 0.03), rng.uniform(0.15, 0.4),
                rng.uniform(0.3, 0.6))
    tex = base * (0.65 + 0.6 * _fbm(rng, s, s, (6, 12, 24, 48)))[..., None]
    cv.paint(mask, tex[mask], TOY_ADE_LABELS['mountain'])


def _ade_building(cv: _Canvas, rng: np.random.Generator, horizon: int) -> None:
    s = cv.size
    bw, bh = rng.uniform(0.08, 0.25) * s, rng.uniform(0.12, 0.45) * s
    x0 = rng.uniform(-0.05 * s, s - 0.5 * bw)
    y1 = horizon + rng.uniform(0, 0.02) * s
    x0i, x1i = max(int(x0), 0), min(int(x0 + bw), s)
    y0i, y1i = max(int(y1 - bh), 0), min(int(y1), s)
    if x1i - x0i < 3 or y1i - y0i < 3:
        return
    wall = _hsv(rng.uniform(0.0, 0.15), rng.uniform(0.05, 0.45), rng.uniform(0.35, 0.85))
    h, w = y1i - y0i, x1i - x0i
    tex = np.empty((h, w, 3), np.float32)
    tex[:] = wall
    tex *= (0.9 + 0.2 * rng.random((h, w, 1), dtype=np.float32))
    # a window grid: the windows are part of the building in ADE20K's labelling
    period = int(rng.integers(max(4, s // 40), max(6, s // 18)))
    win = rng.uniform(0.35, 0.65)
    lit = _hsv(0.13, 0.5, 0.95) if rng.random() < 0.4 else _hsv(0.6, 0.4, 0.25)
    ys, xs = np.arange(h) % period, np.arange(w) % period
    grid = (ys[:, None] >= period * (1 - win) / 2) & (ys[:, None] < period * (1 + win) / 2) \
        & (xs[None, :] >= period * (1 - win) / 2) & (xs[None, :] < period * (1 + win) / 2)
    grid[: period // 2] = False  # a plain band under the roof
    tex[grid] = lit
    mask = np.zeros((s, s), bool)
    mask[y0i:y1i, x0i:x1i] = True
    colour = np.zeros((s, s, 3), np.float32)
    colour[y0i:y1i, x0i:x1i] = tex
    if rng.random() < 0.35:  # a pitched roof
        roof = _hsv(rng.uniform(0.0, 0.05), rng.uniform(0.4, 0.7), rng.uniform(0.3, 0.6))
        rmask = cv.new_mask()
        _fill_poly(rmask, np.array([[x0i - 2, y0i], [x1i + 2, y0i], [(x0i + x1i) / 2, y0i - 0.3 * w]]))
        roof_m = rmask.astype(bool) & ~mask
        colour[roof_m] = roof
        mask |= roof_m
    cv.paint(mask, colour[mask], TOY_ADE_LABELS['building'])


def _ade_ground(cv: _Canvas, rng: np.random.Generator, horizon: int) -> np.ndarray | None:
    """Grass below the horizon, then maybe a road to a vanishing point; returns the road mask."""
    s = cv.size
    g = s - horizon  # ground rows: textures are made for this band only
    grass = _hsv(rng.uniform(0.18, 0.33), rng.uniform(0.45, 0.8), rng.uniform(0.35, 0.7))
    blades = cv2.blur(rng.standard_normal((g, s), dtype=np.float32), (1, 7))  # short vertical streaks
    tex = grass * (0.75 + 0.45 * _fbm(rng, g, s, (4, 8, 16)))[..., None] + (18 * blades)[..., None]
    cv.paint_rows(horizon, s, tex, TOY_ADE_LABELS['grass'])
    if rng.random() >= 0.85:
        return None
    vx, bx = rng.uniform(0.3, 0.7) * s, rng.uniform(0.2, 0.8) * s
    tw, bw = rng.uniform(0.005, 0.03) * s, rng.uniform(0.2, 0.45) * s
    road = cv.new_mask()
    _fill_poly(road, np.array([[vx - tw, horizon], [vx + tw, horizon], [bx + bw, s + 1], [bx - bw, s + 1]]))
    road_m = road.astype(bool)
    road_m[:horizon] = False
    grey = rng.uniform(70, 130)
    tex = np.float32(grey) * (0.85 + 0.3 * _fbm(rng, g, s, (8, 16, 32)))[..., None] \
        + 10 * rng.standard_normal((g, s, 1), dtype=np.float32)
    tex = np.repeat(tex, 3, axis=2)
    # dashed centre line, widening towards the viewer; it is road in ADE20K's labelling
    lane = cv.new_mask()
    n_dash = 8
    for d in range(n_dash):
        t0, t1 = (d + 0.2) / n_dash, (d + 0.6) / n_dash
        y0, y1 = horizon + (s - horizon) * t0 ** 1.5, horizon + (s - horizon) * t1 ** 1.5
        x0, x1 = vx + (bx - vx) * (y0 - horizon) / (s - horizon), vx + (bx - vx) * (y1 - horizon) / (s - horizon)
        w0, w1 = 0.004 * s + 0.01 * s * t0, 0.004 * s + 0.01 * s * t1
        _fill_poly(lane, np.array([[x0 - w0, y0], [x0 + w0, y0], [x1 + w1, y1], [x1 - w1, y1]]))
    tex[lane[horizon:].astype(bool)] = _hsv(0.14, rng.uniform(0.0, 0.6), 0.95)
    cv.paint_rows(horizon, s, tex, TOY_ADE_LABELS['road'], mask=road_m[horizon:])
    return road_m


def _perspective(horizon: int, size: int, y: float) -> float:
    """Object scale at ground row ``y``: small at the horizon, 1 at the bottom edge."""
    return 0.15 + 0.85 * (y - horizon) / max(size - horizon, 1)


def _shade(base: np.ndarray, shade: np.ndarray, m: np.ndarray, amount: float = 0.4) -> np.ndarray:
    """``base`` modulated by the per-image shading field inside ``m``: (M, 3)."""
    return base[None, :] * (1 - amount / 2 + amount * shade[m])[:, None]


def _ade_tree(cv: _Canvas, rng: np.random.Generator, horizon: int, x: float, y: float,
              leaves: np.ndarray, shade: np.ndarray) -> None:
    s = cv.size
    h = _perspective(horizon, s, y) * rng.uniform(0.3, 0.55) * s
    trunk = cv.new_mask()
    _fill_rect(trunk, x - 0.04 * h, y - 0.45 * h, x + 0.04 * h, y)
    crown = cv.new_mask()
    r = 0.27 * h
    for _ in range(int(rng.integers(3, 7))):
        _fill_circle(crown, x + rng.uniform(-0.6, 0.6) * r, y - 0.62 * h + rng.uniform(-0.45, 0.45) * r,
                     r * rng.uniform(0.55, 0.9))
    trunk_m = trunk.astype(bool) & ~crown.astype(bool)
    crown_m = crown.astype(bool)
    cv.paint(trunk_m, _shade(_hsv(0.07, 0.6, rng.uniform(0.25, 0.4)), shade, trunk_m), TOY_ADE_LABELS['tree'])
    green = _hsv(rng.uniform(0.22, 0.4), rng.uniform(0.5, 0.85), rng.uniform(0.25, 0.5))
    cv.paint(crown_m, green[None, :] * (0.5 + 0.9 * leaves[crown_m])[:, None], TOY_ADE_LABELS['tree'])


def _ade_car(cv: _Canvas, rng: np.random.Generator, horizon: int, x: float, y: float, shade: np.ndarray) -> None:
    s = cv.size
    w = _perspective(horizon, s, y) * rng.uniform(0.22, 0.34) * s
    h = 0.32 * w
    body, cabin, glass, wheels = cv.new_mask(), cv.new_mask(), cv.new_mask(), cv.new_mask()
    _fill_rect(body, x - w / 2, y - 1.1 * h, x + w / 2, y - 0.2 * h)
    _fill_poly(cabin, np.array([[x - 0.35 * w, y - 1.1 * h], [x + 0.35 * w, y - 1.1 * h],
                                [x + 0.22 * w, y - 1.75 * h], [x - 0.22 * w, y - 1.75 * h]]))
    _fill_poly(glass, np.array([[x - 0.3 * w, y - 1.15 * h], [x + 0.3 * w, y - 1.15 * h],
                                [x + 0.19 * w, y - 1.65 * h], [x - 0.19 * w, y - 1.65 * h]]))
    for wx in (x - 0.3 * w, x + 0.3 * w):
        _fill_circle(wheels, wx, y - 0.25 * h, 0.25 * h)
    paint = _hsv(rng.random(), rng.uniform(0.4, 0.95), rng.uniform(0.35, 0.95))
    car = (body | cabin).astype(bool)
    colour = np.zeros((s, s, 3), np.float32)
    colour[car] = _shade(paint, shade, car, 0.3)
    colour[glass.astype(bool)] = _hsv(0.58, 0.3, 0.3)
    colour[wheels.astype(bool)] = 25.0
    car |= wheels.astype(bool)
    cv.paint(car, colour[car], TOY_ADE_LABELS['car'])


def _ade_person(cv: _Canvas, rng: np.random.Generator, horizon: int, x: float, y: float) -> None:
    s = cv.size
    h = _perspective(horizon, s, y) * rng.uniform(0.22, 0.34) * s
    head, torso, legs = cv.new_mask(), cv.new_mask(), cv.new_mask()
    _fill_circle(head, x, y - 0.9 * h, 0.09 * h)
    _fill_ellipse(torso, x, y - 0.6 * h, 0.13 * h, 0.22 * h, 0)
    for side in (-1, 1):
        _fill_rect(legs, x + side * 0.07 * h - 0.04 * h, y - 0.42 * h, x + side * 0.07 * h + 0.04 * h, y)
        _fill_poly(torso, np.array([[x + side * 0.1 * h, y - 0.78 * h], [x + side * 0.15 * h, y - 0.78 * h],
                                    [x + side * 0.22 * h, y - 0.45 * h], [x + side * 0.17 * h, y - 0.45 * h]]))
    colour = np.zeros((s, s, 3), np.float32)
    colour[torso.astype(bool)] = _hsv(rng.random(), rng.uniform(0.3, 0.9), rng.uniform(0.3, 0.9))
    colour[legs.astype(bool)] = _hsv(rng.uniform(0.55, 0.7), rng.uniform(0.2, 0.6), rng.uniform(0.1, 0.4))
    colour[head.astype(bool)] = _hsv(rng.uniform(0.04, 0.09), rng.uniform(0.3, 0.6), rng.uniform(0.35, 0.9))
    m = (head | torso | legs).astype(bool)  # uint8 0/1 masks: | is the union
    cv.paint(m, colour[m], TOY_ADE_LABELS['person'])


def _ade_clutter(cv: _Canvas, rng: np.random.Generator, horizon: int, x: float, y: float) -> None:
    """A pole with a sign: not one of our classes, so it is label 0 (ignored), as in ADE20K."""
    s = cv.size
    h = _perspective(horizon, s, y) * rng.uniform(0.3, 0.5) * s
    m = cv.new_mask()
    _fill_rect(m, x - 0.02 * h, y - h, x + 0.02 * h, y)
    colour = np.zeros((s, s, 3), np.float32)
    colour[m.astype(bool)] = rng.uniform(60, 160)
    sign = cv.new_mask()
    if rng.random() < 0.5:
        _fill_circle(sign, x, y - h, 0.12 * h)
    else:
        _fill_rect(sign, x - 0.15 * h, y - 1.1 * h, x + 0.15 * h, y - 0.85 * h)
    colour[sign.astype(bool)] = _hsv(rng.random(), rng.uniform(0.5, 1), rng.uniform(0.5, 1))
    m = (m | sign).astype(bool)
    cv.paint(m, colour[m], 0)


def render_ade_image(rng: np.random.Generator, size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Draw one toy ADE20K scene: returns ``(image (H, W, 3) uint8 RGB, label (H, W) uint8)``.

    Back to front: sky, mountains, buildings, grass, road, then trees, poles, cars and people
    sorted by the row they stand on (far ones first), each scaled by its distance to the horizon.
    """
    s = size
    cv = _Canvas(s)
    horizon = int(s * rng.uniform(0.38, 0.58))
    _ade_sky(cv, rng, horizon)
    if rng.random() < 0.6:
        _ade_mountains(cv, rng, horizon)
    if rng.random() < 0.75:
        for _ in range(int(rng.integers(1, 5))):
            _ade_building(cv, rng, horizon)
    road = _ade_ground(cv, rng, horizon)

    objects: list[tuple[float, str, float]] = []  # (ground row, kind, column)
    ys_lo = horizon + 0.05 * (s - horizon)
    for _ in range(int(rng.integers(0, 6))):
        objects.append((rng.uniform(ys_lo, s), 'tree', rng.uniform(0, s)))
    for _ in range(int(rng.integers(0, 3)) if rng.random() < 0.5 else 0):
        objects.append((rng.uniform(ys_lo, s), 'clutter', rng.uniform(0, s)))
    for _ in range(int(rng.integers(0, 5))):
        objects.append((rng.uniform(ys_lo, s), 'person', rng.uniform(0, s)))
    if road is not None:
        rows = np.flatnonzero(road.any(1))
        rows = rows[rows >= horizon + 0.15 * (s - horizon)]
        for _ in range(int(rng.integers(0, 4)) if rows.size else 0):
            y = int(rng.choice(rows))
            cols = np.flatnonzero(road[y])
            objects.append((float(y), 'car', float(rng.uniform(cols[0], cols[-1] + 1))))
    objects.sort(key=lambda o: o[0])
    shade = _fbm(rng, s, s, (4, 8, 16))
    leaves = _smooth_noise(rng, s, s, max(s // 5, 8)) if any(o[1] == 'tree' for o in objects) else shade
    for y, kind, x in objects:
        if kind == 'tree':
            _ade_tree(cv, rng, horizon, x, y, leaves, shade)
        elif kind == 'car':
            _ade_car(cv, rng, horizon, x, y, shade)
        elif kind == 'person':
            _ade_person(cv, rng, horizon, x, y)
        else:
            _ade_clutter(cv, rng, horizon, x, y)
    return _finish(cv.img, rng, sigma=4.0), cv.lab


def _ade_name(split: str, index: int) -> str:
    return f'ADE_{split}_{index + 1:08d}'


def _ade_expected(num_train: int, num_val: int) -> list[str]:
    """The relative paths a complete toy ADE20K set has."""
    paths = []
    for split, n in (('train', num_train), ('val', num_val)):
        for i in range(n):
            paths += [f'images/{_ADE_SPLITS[split]}/{_ade_name(split, i)}.jpg',
                      f'annotations/{_ADE_SPLITS[split]}/{_ade_name(split, i)}.png']
    return paths


# ---------------------------------------------------------------------------------------------
# Manifest (idempotency) and the public entry points
# ---------------------------------------------------------------------------------------------
_OWNED = {'coco': ('annotations', 'train2017', 'val2017'), 'ade': ('images', 'annotations')}


def _manifest_args(kind: str, **args: Any) -> dict[str, Any]:
    return {'generator': 'mmrecvit.datasets.toy', 'version': TOY_DATA_VERSION, 'kind': kind, 'args': args}


def _is_complete(root: Path, expected: dict[str, Any], paths: Iterable[str]) -> bool:
    try:
        manifest = json.loads((root / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return False
    same = all(manifest.get(k) == v for k, v in expected.items())
    return same and manifest.get('complete') is True and all((root / p).is_file() for p in paths)


def _prepare(root: Path, kind: str, force: bool) -> None:
    """Empty the folders this generator owns under ``root``; refuse to touch a foreign dataset."""
    if root.is_dir() and any(root.iterdir()) and not (root / MANIFEST_NAME).is_file() and not force:
        raise FileExistsError(f'{root} is not empty and has no {MANIFEST_NAME}: it is not a toy set written by this '
                              'generator; pass force=True (--force) to overwrite its '
                              f'{", ".join(_OWNED[kind])} folders, or choose another root')
    for name in _OWNED[kind]:
        if (root / name).is_dir():
            shutil.rmtree(root / name)
    root.mkdir(parents=True, exist_ok=True)


def _check_args(num_train: int, num_val: int, size: int, seed: int) -> None:
    for name, value, low in (('num_train', num_train, 0), ('num_val', num_val, 0), ('size', size, 64),
                             ('seed', seed, 0)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise ValueError(f'{name} must be an integer >= {low}, got {value!r}')


def _generate(kind: str, root: PathLike, args: dict[str, Any], expected_paths: list[str], force: bool,
              write: Any) -> ToyDataResult:
    """Shared skip / prepare / write / manifest logic of the two dataset makers."""
    start = time.perf_counter()
    root = Path(root)
    expected = _manifest_args(kind, **args)
    skipped = not force and _is_complete(root, expected, expected_paths)
    if not skipped:
        _prepare(root, kind, force)
        # written first with complete=False, so an interrupted run is recognised as ours and redone
        (root / MANIFEST_NAME).write_text(json.dumps({**expected, 'complete': False}, indent=2))
        write(root)
        (root / MANIFEST_NAME).write_text(json.dumps({**expected, 'complete': True}, indent=2))
    return ToyDataResult(kind=kind, root=root, num_train=args['num_train'], num_val=args['num_val'],
                         size=args['size'], seconds=time.perf_counter() - start, skipped=skipped)


def make_toy_coco(root: PathLike = f'data/{TOY_COCO_DIR}', num_train: int = 200, num_val: int = 50,
                  size: int = 256, seed: int = 0, min_instances: int = 2, max_instances: int = 6,
                  radius_range: Sequence[float] = (0.05, 0.2), force: bool = False,
                  progress: bool = True) -> ToyDataResult:
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
    _check_args(num_train, num_val, size, seed)
    if not 1 <= min_instances <= max_instances:
        raise ValueError(f'need 1 <= min_instances <= max_instances, got {min_instances}, {max_instances}')
    radius_range = [float(v) for v in radius_range]  # a list: it is compared with the manifest's JSON
    if len(radius_range) != 2 or not 0 < radius_range[0] <= radius_range[1] <= 0.5:
        raise ValueError(f'radius_range must be (low, high) with 0 < low <= high <= 0.5, got {radius_range}')
    args = dict(num_train=num_train, num_val=num_val, size=size, seed=seed, min_instances=min_instances,
                max_instances=max_instances, radius_range=radius_range)

    def write(r: Path) -> None:
        for split, n in (('train', num_train), ('val', num_val)):
            _write_coco_split(r, split, n, size, seed, min_instances, max_instances, radius_range, progress)

    result = _generate('coco', root, args, _coco_expected(num_train, num_val), force, write)
    result.files = {f'{s}_ann': result.root / 'annotations' / f'instances_{d}.json' for s, d in _COCO_SPLITS.items()}
    result.files.update({f'{s}_img': result.root / d for s, d in _COCO_SPLITS.items()})
    return result


def make_toy_ade20k(root: PathLike = f'data/{TOY_ADE_DIR}', num_train: int = 120, num_val: int = 30,
                    size: int = 256, seed: int = 0, force: bool = False, progress: bool = True) -> ToyDataResult:
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
    _check_args(num_train, num_val, size, seed)
    args = dict(num_train=num_train, num_val=num_val, size=size, seed=seed)

    def write(r: Path) -> None:
        for split, n in (('train', num_train), ('val', num_val)):
            img_dir, ann_dir = r / 'images' / _ADE_SPLITS[split], r / 'annotations' / _ADE_SPLITS[split]
            img_dir.mkdir(parents=True, exist_ok=True)
            ann_dir.mkdir(parents=True, exist_ok=True)
            for i in tqdm(range(n), desc=f'toy ADE20K {_ADE_SPLITS[split]}', unit='img', disable=not progress):
                img, lab = render_ade_image(_rng_for(seed, 'ade', split, i), size)
                (img_dir / f'{_ade_name(split, i)}.jpg').write_bytes(_encode_jpg(img))
                (ann_dir / f'{_ade_name(split, i)}.png').write_bytes(_encode_png(lab))

    result = _generate('ade', root, args, _ade_expected(num_train, num_val), force, write)
    result.files = {f'{s}_{k}': result.root / k / d for s, d in _ADE_SPLITS.items() for k in ('images', 'annotations')}
    return result


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
