"""One toy ADE20K scene: an outdoor picture and its label map, painted together (`render_ade_image`).

Sky, mountains, buildings, grass and road, then trees, poles, cars and people sorted by the row they
stand on; every region is painted into the image and the label map at once, so they always agree. The
labels are ADE20K's own 1-based objectInfo150 indices (`TOY_ADE_LABELS`); 0 is "other" (ignored). How
the scenes become a dataset on disk: `ade.py`.
"""

from __future__ import annotations

import cv2
import numpy as np

from .draw import (
    fbm,
    fill_circle,
    fill_ellipse,
    fill_poly,
    fill_rect,
    finish,
    hsv,
    pixel_grid,
    smooth_noise,
)

TOY_ADE_LABELS: dict[str, int] = {
    'building': 2,
    'sky': 3,
    'tree': 5,
    'road': 7,
    'grass': 10,
    'person': 13,
    'mountain': 17,
    'car': 21,
}
"""Region classes -> value written in the label PNG = ADE20K's 1-based objectInfo150 index
(mmseg's ADE20K class index is ``value - 1``). Every other pixel is 0 ("other", ignored)."""


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


def _sky(cv: _Canvas, rng: np.random.Generator, horizon: int) -> None:
    s = cv.size
    kind = rng.integers(3)
    if kind == 0:  # clear day
        top = hsv(rng.uniform(0.55, 0.62), rng.uniform(0.5, 0.8), rng.uniform(0.7, 0.95))
        bottom = hsv(rng.uniform(0.55, 0.6), rng.uniform(0.15, 0.35), 0.97)
    elif kind == 1:  # dusk
        top = hsv(rng.uniform(0.6, 0.72), rng.uniform(0.4, 0.7), rng.uniform(0.35, 0.6))
        bottom = hsv(rng.uniform(0.02, 0.1), rng.uniform(0.4, 0.7), rng.uniform(0.85, 1.0))
    else:  # overcast
        g = rng.uniform(0.6, 0.85)
        top, bottom = hsv(0.6, 0.08, g), hsv(0.6, 0.04, min(g + 0.1, 1.0))
    t = (np.arange(horizon, dtype=np.float32) / horizon)[:, None, None]
    sky = top * (1 - t) + bottom * t  # (horizon, 1, 3): a vertical gradient
    cloud = 0.85 * np.clip((fbm(rng, horizon, s, (4, 8, 16, 32)) - rng.uniform(0.5, 0.7)) * 4, 0, 1)[..., None]
    cv.paint_rows(0, horizon, sky * (1 - cloud) + 245.0 * cloud, TOY_ADE_LABELS['sky'])


def _mountains(cv: _Canvas, rng: np.random.Generator, horizon: int) -> None:
    s = cv.size
    yy, _ = pixel_grid(s)
    coarse = cv2.resize(
        rng.random((1, int(rng.integers(3, 7))), dtype=np.float32), (s, 1), interpolation=cv2.INTER_CUBIC
    )[0]
    fine = cv2.resize(rng.random((1, 24), dtype=np.float32), (s, 1), interpolation=cv2.INTER_LINEAR)[0]
    profile = np.clip(0.75 * coarse + 0.25 * fine, 0.05, 1.0)
    ridge = horizon - rng.uniform(0.1, 0.28) * s * profile
    mask = (yy >= ridge[None, :]) & (yy < horizon + 2)
    base = hsv(rng.choice([0.08, 0.6, 0.75]) + rng.uniform(-0.03, 0.03), rng.uniform(0.15, 0.4), rng.uniform(0.3, 0.6))
    tex = base * (0.65 + 0.6 * fbm(rng, s, s, (6, 12, 24, 48)))[..., None]
    cv.paint(mask, tex[mask], TOY_ADE_LABELS['mountain'])


def _building(cv: _Canvas, rng: np.random.Generator, horizon: int) -> None:
    s = cv.size
    bw, bh = rng.uniform(0.08, 0.25) * s, rng.uniform(0.12, 0.45) * s
    x0 = rng.uniform(-0.05 * s, s - 0.5 * bw)
    y1 = horizon + rng.uniform(0, 0.02) * s
    x0i, x1i = max(int(x0), 0), min(int(x0 + bw), s)
    y0i, y1i = max(int(y1 - bh), 0), min(int(y1), s)
    if x1i - x0i < 3 or y1i - y0i < 3:
        return
    wall = hsv(rng.uniform(0.0, 0.15), rng.uniform(0.05, 0.45), rng.uniform(0.35, 0.85))
    h, w = y1i - y0i, x1i - x0i
    tex = np.empty((h, w, 3), np.float32)
    tex[:] = wall
    tex *= 0.9 + 0.2 * rng.random((h, w, 1), dtype=np.float32)
    # a window grid: the windows are part of the building in ADE20K's labelling
    period = int(rng.integers(max(4, s // 40), max(6, s // 18)))
    win = rng.uniform(0.35, 0.65)
    lit = hsv(0.13, 0.5, 0.95) if rng.random() < 0.4 else hsv(0.6, 0.4, 0.25)
    ys, xs = np.arange(h) % period, np.arange(w) % period
    grid = (
        (ys[:, None] >= period * (1 - win) / 2)
        & (ys[:, None] < period * (1 + win) / 2)
        & (xs[None, :] >= period * (1 - win) / 2)
        & (xs[None, :] < period * (1 + win) / 2)
    )
    grid[: period // 2] = False  # a plain band under the roof
    tex[grid] = lit
    mask = np.zeros((s, s), bool)
    mask[y0i:y1i, x0i:x1i] = True
    colour = np.zeros((s, s, 3), np.float32)
    colour[y0i:y1i, x0i:x1i] = tex
    if rng.random() < 0.35:  # a pitched roof
        roof = hsv(rng.uniform(0.0, 0.05), rng.uniform(0.4, 0.7), rng.uniform(0.3, 0.6))
        rmask = cv.new_mask()
        fill_poly(rmask, np.array([[x0i - 2, y0i], [x1i + 2, y0i], [(x0i + x1i) / 2, y0i - 0.3 * w]]))
        roof_m = rmask.astype(bool) & ~mask
        colour[roof_m] = roof
        mask |= roof_m
    cv.paint(mask, colour[mask], TOY_ADE_LABELS['building'])


def _trapezoid(x0: float, y0: float, w0: float, x1: float, y1: float, w1: float) -> np.ndarray:
    """The corners of a quadrilateral with horizontal sides: half-width `w0` about `x0` at row `y0`, `w1` about `x1` at
    row `y1` (a road, a lane dash, a car's cabin)."""
    return np.array([[x0 - w0, y0], [x0 + w0, y0], [x1 + w1, y1], [x1 - w1, y1]])


def _ground(cv: _Canvas, rng: np.random.Generator, horizon: int) -> np.ndarray | None:
    """Grass below the horizon, then maybe a road to a vanishing point; returns the road mask."""
    s = cv.size
    g = s - horizon  # ground rows: textures are made for this band only
    grass = hsv(rng.uniform(0.18, 0.33), rng.uniform(0.45, 0.8), rng.uniform(0.35, 0.7))
    blades = cv2.blur(rng.standard_normal((g, s), dtype=np.float32), (1, 7))  # short vertical streaks
    tex = grass * (0.75 + 0.45 * fbm(rng, g, s, (4, 8, 16)))[..., None] + (18 * blades)[..., None]
    cv.paint_rows(horizon, s, tex, TOY_ADE_LABELS['grass'])
    if rng.random() >= 0.85:
        return None
    vx, bx = rng.uniform(0.3, 0.7) * s, rng.uniform(0.2, 0.8) * s
    tw, bw = rng.uniform(0.005, 0.03) * s, rng.uniform(0.2, 0.45) * s
    road = cv.new_mask()
    fill_poly(road, _trapezoid(vx, horizon, tw, bx, s + 1, bw))
    road_m = road.astype(bool)
    road_m[:horizon] = False
    grey = rng.uniform(70, 130)
    tex = np.float32(grey) * (0.85 + 0.3 * fbm(rng, g, s, (8, 16, 32)))[..., None] + 10 * rng.standard_normal(
        (g, s, 1), dtype=np.float32
    )
    tex = np.repeat(tex, 3, axis=2)
    # dashed centre line, widening towards the viewer; it is road in ADE20K's labelling
    lane = cv.new_mask()
    n_dash = 8
    for d in range(n_dash):
        t0, t1 = (d + 0.2) / n_dash, (d + 0.6) / n_dash
        y0, y1 = horizon + (s - horizon) * t0**1.5, horizon + (s - horizon) * t1**1.5
        x0, x1 = vx + (bx - vx) * (y0 - horizon) / (s - horizon), vx + (bx - vx) * (y1 - horizon) / (s - horizon)
        w0, w1 = 0.004 * s + 0.01 * s * t0, 0.004 * s + 0.01 * s * t1
        fill_poly(lane, _trapezoid(x0, y0, w0, x1, y1, w1))
    tex[lane[horizon:].astype(bool)] = hsv(0.14, rng.uniform(0.0, 0.6), 0.95)
    cv.paint_rows(horizon, s, tex, TOY_ADE_LABELS['road'], mask=road_m[horizon:])
    return road_m


def _perspective(horizon: int, size: int, y: float) -> float:
    """Object scale at ground row ``y``: small at the horizon, 1 at the bottom edge."""
    return 0.15 + 0.85 * (y - horizon) / max(size - horizon, 1)


def _shade(base: np.ndarray, shade: np.ndarray, m: np.ndarray, amount: float = 0.4) -> np.ndarray:
    """``base`` modulated by the per-image shading field inside ``m``: (M, 3)."""
    return base[None, :] * (1 - amount / 2 + amount * shade[m])[:, None]


def _tree(
    cv: _Canvas, rng: np.random.Generator, horizon: int, x: float, y: float, leaves: np.ndarray, shade: np.ndarray
) -> None:
    s = cv.size
    h = _perspective(horizon, s, y) * rng.uniform(0.3, 0.55) * s
    trunk = cv.new_mask()
    fill_rect(trunk, x - 0.04 * h, y - 0.45 * h, x + 0.04 * h, y)
    crown = cv.new_mask()
    r = 0.27 * h
    for _ in range(int(rng.integers(3, 7))):
        fill_circle(
            crown,
            x + rng.uniform(-0.6, 0.6) * r,
            y - 0.62 * h + rng.uniform(-0.45, 0.45) * r,
            r * rng.uniform(0.55, 0.9),
        )
    trunk_m = trunk.astype(bool) & ~crown.astype(bool)
    crown_m = crown.astype(bool)
    cv.paint(trunk_m, _shade(hsv(0.07, 0.6, rng.uniform(0.25, 0.4)), shade, trunk_m), TOY_ADE_LABELS['tree'])
    green = hsv(rng.uniform(0.22, 0.4), rng.uniform(0.5, 0.85), rng.uniform(0.25, 0.5))
    cv.paint(crown_m, green[None, :] * (0.5 + 0.9 * leaves[crown_m])[:, None], TOY_ADE_LABELS['tree'])


def _car(cv: _Canvas, rng: np.random.Generator, horizon: int, x: float, y: float, shade: np.ndarray) -> None:
    s = cv.size
    w = _perspective(horizon, s, y) * rng.uniform(0.22, 0.34) * s
    h = 0.32 * w
    body, cabin, glass, wheels = cv.new_mask(), cv.new_mask(), cv.new_mask(), cv.new_mask()
    fill_rect(body, x - w / 2, y - 1.1 * h, x + w / 2, y - 0.2 * h)
    fill_poly(cabin, _trapezoid(x, y - 1.1 * h, 0.35 * w, x, y - 1.75 * h, 0.22 * w))
    fill_poly(glass, _trapezoid(x, y - 1.15 * h, 0.3 * w, x, y - 1.65 * h, 0.19 * w))
    for wx in (x - 0.3 * w, x + 0.3 * w):
        fill_circle(wheels, wx, y - 0.25 * h, 0.25 * h)
    paint = hsv(rng.random(), rng.uniform(0.4, 0.95), rng.uniform(0.35, 0.95))
    car = (body | cabin).astype(bool)
    colour = np.zeros((s, s, 3), np.float32)
    colour[car] = _shade(paint, shade, car, 0.3)
    colour[glass.astype(bool)] = hsv(0.58, 0.3, 0.3)
    colour[wheels.astype(bool)] = 25.0
    car |= wheels.astype(bool)
    cv.paint(car, colour[car], TOY_ADE_LABELS['car'])


def _person(cv: _Canvas, rng: np.random.Generator, horizon: int, x: float, y: float) -> None:
    s = cv.size
    h = _perspective(horizon, s, y) * rng.uniform(0.22, 0.34) * s
    head, torso, legs = cv.new_mask(), cv.new_mask(), cv.new_mask()
    fill_circle(head, x, y - 0.9 * h, 0.09 * h)
    fill_ellipse(torso, x, y - 0.6 * h, 0.13 * h, 0.22 * h, 0)
    for side in (-1, 1):
        fill_rect(legs, x + side * 0.07 * h - 0.04 * h, y - 0.42 * h, x + side * 0.07 * h + 0.04 * h, y)
        fill_poly(
            torso,
            np.array(
                [
                    [x + side * 0.1 * h, y - 0.78 * h],
                    [x + side * 0.15 * h, y - 0.78 * h],
                    [x + side * 0.22 * h, y - 0.45 * h],
                    [x + side * 0.17 * h, y - 0.45 * h],
                ]
            ),
        )
    colour = np.zeros((s, s, 3), np.float32)
    colour[torso.astype(bool)] = hsv(rng.random(), rng.uniform(0.3, 0.9), rng.uniform(0.3, 0.9))
    colour[legs.astype(bool)] = hsv(rng.uniform(0.55, 0.7), rng.uniform(0.2, 0.6), rng.uniform(0.1, 0.4))
    colour[head.astype(bool)] = hsv(rng.uniform(0.04, 0.09), rng.uniform(0.3, 0.6), rng.uniform(0.35, 0.9))
    m = (head | torso | legs).astype(bool)  # uint8 0/1 masks: | is the union
    cv.paint(m, colour[m], TOY_ADE_LABELS['person'])


def _clutter(cv: _Canvas, rng: np.random.Generator, horizon: int, x: float, y: float) -> None:
    """A pole with a sign: not one of our classes, so it is label 0 (ignored), as in ADE20K."""
    s = cv.size
    h = _perspective(horizon, s, y) * rng.uniform(0.3, 0.5) * s
    m = cv.new_mask()
    fill_rect(m, x - 0.02 * h, y - h, x + 0.02 * h, y)
    colour = np.zeros((s, s, 3), np.float32)
    colour[m.astype(bool)] = rng.uniform(60, 160)
    sign = cv.new_mask()
    if rng.random() < 0.5:
        fill_circle(sign, x, y - h, 0.12 * h)
    else:
        fill_rect(sign, x - 0.15 * h, y - 1.1 * h, x + 0.15 * h, y - 0.85 * h)
    colour[sign.astype(bool)] = hsv(rng.random(), rng.uniform(0.5, 1), rng.uniform(0.5, 1))
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
    _sky(cv, rng, horizon)
    if rng.random() < 0.6:
        _mountains(cv, rng, horizon)
    if rng.random() < 0.75:
        for _ in range(int(rng.integers(1, 5))):
            _building(cv, rng, horizon)
    road = _ground(cv, rng, horizon)

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
    shade = fbm(rng, s, s, (4, 8, 16))
    leaves = smooth_noise(rng, s, s, max(s // 5, 8)) if any(o[1] == 'tree' for o in objects) else shade
    for y, kind, x in objects:
        if kind == 'tree':
            _tree(cv, rng, horizon, x, y, leaves, shade)
        elif kind == 'car':
            _car(cv, rng, horizon, x, y, shade)
        elif kind == 'person':
            _person(cv, rng, horizon, x, y)
        else:
            _clutter(cv, rng, horizon, x, y)
    return finish(cv.img, rng, sigma=4.0), cv.lab
