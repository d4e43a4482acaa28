"""Drawing primitives shared by the toy COCO, ADE20K and classification renderers.

Images are RGB float32 in 0..255 while they are drawn and become uint8 in `finish`; masks are
uint8 0/1 for OpenCV's fill functions and bool once combined. Shapes are filled with sub-pixel
precision but without antialiasing, so the pixels painted through a mask are exactly the pixels
its label or annotation covers.
"""

from __future__ import annotations

import colorsys
from collections.abc import Sequence
from functools import lru_cache

import cv2
import numpy as np

# Part of every image's seed: the codes must never change, or a seed no longer gives the same files.
_KIND_CODE = {'coco': 0, 'ade': 1, 'cls': 2}
_SPLIT_CODE = {'train': 0, 'val': 1}


def rng_for(seed: int, kind: str, split: str, index: int) -> np.random.Generator:
    """The generator of one image: independent of the counts and of every other image."""
    return np.random.default_rng(np.random.SeedSequence([seed, _KIND_CODE[kind], _SPLIT_CODE[split], index]))


def smooth_noise(rng: np.random.Generator, h: int, w: int, cells: int) -> np.ndarray:
    """Value noise: a ``cells``-wide random grid upsampled bicubically, scaled to 0..1."""
    grid = rng.random((cells, cells), dtype=np.float32)
    field_ = cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC)
    lo, hi = float(field_.min()), float(field_.max())
    return (field_ - lo) / max(hi - lo, 1e-6)


def fbm(rng: np.random.Generator, h: int, w: int, octaves: Sequence[int] = (3, 6, 12, 24)) -> np.ndarray:
    """Fractal noise (sum of value-noise octaves with halving weights), scaled to 0..1."""
    total = np.zeros((h, w), np.float32)
    weight = 1.0
    for cells in octaves:
        total += weight * smooth_noise(rng, h, w, cells)
        weight *= 0.5
    lo, hi = float(total.min()), float(total.max())
    return (total - lo) / max(hi - lo, 1e-6)


def hsv(h: float, s: float, v: float) -> np.ndarray:
    """HSV in 0..1 -> RGB float32 in 0..255."""
    return np.array(colorsys.hsv_to_rgb(h % 1.0, s, v), np.float32) * 255.0


def fill_poly(mask: np.ndarray, pts: np.ndarray) -> None:
    """Fill one polygon given in float pixel coordinates (sub-pixel precise, not antialiased)."""
    cv2.fillPoly(mask, [np.round(np.asarray(pts) * 16).astype(np.int32)], 1, cv2.LINE_8, 4)


def fill_circle(mask: np.ndarray, cx: float, cy: float, r: float) -> None:
    cv2.circle(mask, (round(cx * 16), round(cy * 16)), max(round(r * 16), 16), 1, -1, cv2.LINE_8, 4)


def fill_ellipse(mask: np.ndarray, cx: float, cy: float, a: float, b: float, angle_deg: float) -> None:
    cv2.ellipse(
        mask,
        (round(cx * 16), round(cy * 16)),
        (max(round(a * 16), 16), max(round(b * 16), 16)),
        angle_deg,
        0,
        360,
        1,
        -1,
        cv2.LINE_8,
        4,
    )


def fill_rect(mask: np.ndarray, x0: float, y0: float, x1: float, y1: float) -> None:
    """Fill the axis-aligned box [x0, x1) x [y0, y1), clipped to the mask."""
    h, w = mask.shape
    xa, xb = max(int(round(x0)), 0), min(int(round(x1)), w)
    ya, yb = max(int(round(y0)), 0), min(int(round(y1)), h)
    if xb > xa and yb > ya:
        mask[ya:yb, xa:xb] = 1


def regular_polygon(cx: float, cy: float, radii: Sequence[float], angle: float) -> np.ndarray:
    """Vertices at the given radii, evenly spaced in angle, rotated by ``angle`` (radians)."""
    k = len(radii)
    t = angle + 2 * np.pi * np.arange(k) / k
    return np.stack([cx + np.asarray(radii) * np.cos(t), cy + np.asarray(radii) * np.sin(t)], axis=1)


def encode_jpg(rgb: np.ndarray, quality: int = 90) -> bytes:
    ok, buf = cv2.imencode('.jpg', np.ascontiguousarray(rgb[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok, 'cv2.imencode failed for a JPEG'
    return buf.tobytes()


def encode_png(gray: np.ndarray) -> bytes:
    ok, buf = cv2.imencode('.png', np.ascontiguousarray(gray), [cv2.IMWRITE_PNG_COMPRESSION, 3])
    assert ok, 'cv2.imencode failed for a PNG'
    return buf.tobytes()


def finish(img: np.ndarray, rng: np.random.Generator, sigma: float) -> np.ndarray:
    """Sensor-like pixel noise and a global gain, then uint8."""
    gain = rng.uniform(0.9, 1.1)
    noise = rng.standard_normal(img.shape, dtype=np.float32) * sigma
    return np.clip(img * gain + noise, 0, 255).astype(np.uint8)


@lru_cache(maxsize=4)
def pixel_grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column coordinates of a ``size`` x ``size`` image (float32, read-only)."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    yy.flags.writeable = False
    xx.flags.writeable = False
    return yy, xx
