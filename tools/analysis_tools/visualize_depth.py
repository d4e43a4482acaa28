"""Draw what a backbone's routers did on images: per-token maps and per-forward tables, as PNGs.

    python tools/analysis_tools/visualize_depth.py configs/det/mask-rcnn_edgerecvit-ti_fpn_1xb2-800it_toy-coco.py \\
        work_dirs/mask-rcnn_edgerecvit-ti_fpn_1xb2-800it_toy-coco/iter_800.pth data/toy_coco/val2017/000001000001.jpg
    python tools/analysis_tools/visualize_depth.py \\
        configs/seg/upernet_srvit-ti_1xb4-150it_toy-ade20k-256x256.py none   # toy image

Everything comes from the statistics of one forward of the backbone (its result's `.stats`, the numbers
the training log and get_flops read too), and the tool iterates over whatever the backbone reports,
so a new backbone needs no change here:

* every `token_maps[key]` (B, ..., h, w) becomes an overlay on the image: Edge-RecViT's `depth`
  (block applications per token) and MoR-ViT's `recursions` (integers: a discrete colour scale),
  Edge-RecViT's ranker `confidence`, SR-ViT's `mixture/unit{u}` (T, h, w): one panel per recursion
  with the weight w_t of every token, and, because the T weights of a token sum to one, a panel
  with the expected recursion sum_t t w_t;
* every `tables[key]` becomes a heat map plus one line per column, e.g. reViT's `gates` (L, E): the
  gate of each expert at each depth step;
* `scalars` are printed.

CHECKPOINT: a checkpoint of the whole model (`tools/train.py`), a backbone-only or timm/DeiT one, or
`none` for the random initialisation (routers at their initial state: SR-ViT's zero routers give
uniform weights, reViT's gates are uniform; useful only to check the tool). IMAGE: one or more
files (default: a toy val image of the config's framework, written by `make_toy_data` if absent).
Each goes through the config's test pipeline (or `--shape`), batch 1.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use('Agg')  # files only, no display
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import BoundaryNorm, Normalize
from mpl_toolkits.axes_grid1 import make_axes_locatable

from mmrecvit.inputs import bad_input, checkpoint_file, image_file, tool_parser
from mmrecvit.mm.tooling import (
    add_cfg_options,
    add_shape_option,
    default_image,
    forward_backbone,
    load_model,
    prepare_inputs,
    shape_arg,
)

REPO = Path(__file__).resolve().parents[2]  # the checkout of this tool; default images go to its data/

# Axis names of tables whose meaning is documented by the backbones (rows, columns, values);
# any other table is drawn with generic names.
TABLE_AXES = {'gates': ('depth step t', 'expert e', 'gate g[t, e]')}
OVERLAY_ALPHA = 0.7
MAX_COLUMNS = 4
EXPECTED = 'expected k = sum_k k w[k]'


def safe_name(key: str) -> str:
    """A statistics key as a file-name part: 'mixture/unit0' -> 'mixture-unit0'."""
    return re.sub(r'[^A-Za-z0-9_.-]+', '-', key).strip('-')


def _panels(value: np.ndarray) -> tuple[list[tuple[str, np.ndarray]], bool]:
    """(…, h, w) map of one image -> titled (h, w) panels, and whether they are a distribution.

    A (K, h, w) map whose K values per token are non-negative and sum to one (mixture weights) gets
    one panel per k (1-based, as the papers number recursions) and the expected index sum_k k w_k.
    """
    if value.ndim == 2:
        return [('', value)], False
    flat = value.reshape(-1, *value.shape[-2:])
    leading = list(np.ndindex(*value.shape[:-2]))
    is_distribution = (
        value.ndim == 3
        and value.shape[0] > 1
        and bool((value >= -1e-6).all())
        and bool(np.allclose(value.sum(0), 1.0, atol=1e-3))
    )
    if is_distribution:
        panels = [(f'w[k={k + 1}]', flat[k]) for k in range(value.shape[0])]
        expected = (np.arange(1, value.shape[0] + 1).reshape(-1, 1, 1) * value).sum(0)
        panels.append((EXPECTED, expected))
    else:
        panels = [(f'[{", ".join(str(i + 1) for i in idx)}]', flat[j]) for j, idx in enumerate(leading)]
    return panels, is_distribution


def _span(lo: float, hi: float, flat: tuple[float, float] | None) -> Normalize:
    """Colour range of the data; `flat` (or lo +- 0.5) when the data is constant to 1e-4."""
    if hi - lo > 1e-4 * max(1.0, abs(hi)):
        return Normalize(lo, hi)
    return Normalize(*(flat if flat is not None else (lo - 0.5, lo + 0.5)))


def colorbar(fig, ax, im, ticks=None):
    """A colour bar as tall as the image drawn in `ax` (matplotlib's `fig.colorbar(ax=...)` spans the axes' box,
    taller than an image of another aspect ratio)."""
    return fig.colorbar(im, cax=make_axes_locatable(ax).append_axes('right', size='5%', pad=0.05), ticks=ticks)


def draw_token_map(image: np.ndarray, value: np.ndarray, patch: int, title: str, label: str, path: Path) -> Path:
    """Overlay the (…, h, w) map of one image on it: the image, then one panel per map."""
    panels, is_distribution = _panels(value)
    H, W = image.shape[:2]
    h, w = value.shape[-2:]
    n = len(panels) + 1
    cols = min(n, MAX_COLUMNS)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.4 * rows + 0.6), squeeze=False)
    axes = axes.ravel()
    axes[0].imshow(image)
    axes[0].set_title(f'input {H}x{W}', fontsize=9)
    integer = np.issubdtype(value.dtype, np.integer)
    if integer:
        lo, hi = int(value.min()), int(value.max())
        levels = np.arange(lo, hi + 2) - 0.5
        cmap = plt.get_cmap('viridis', len(levels) - 1)
        norm, ticks = BoundaryNorm(levels, cmap.N), np.arange(lo, hi + 1)
    else:
        # One scale for all panels of the figure (weights comparable across steps), spanning the data;
        # a (nearly) constant map, e.g. the uniform weights of an untrained router, gets a plain range.
        cmap, ticks = plt.get_cmap('viridis'), None
        norm = _span(float(value.min()), float(value.max()), (0.0, 1.0) if is_distribution else None)
    for ax, (name, panel) in zip(axes[1:], panels):
        own_norm = norm
        if name == EXPECTED:  # its own scale, within 1..K
            own_norm = _span(float(panel.min()), float(panel.max()), (1.0, float(value.shape[0])))
        ax.imshow(image)
        im = ax.imshow(
            panel,
            cmap=cmap,
            norm=own_norm,
            alpha=OVERLAY_ALPHA,
            interpolation='nearest',
            extent=(0, w * patch, h * patch, 0),
        )
        ax.set_xlim(0, W)
        ax.set_ylim(H, 0)
        ax.set_title(f'{label} {name}'.strip() + f'  (mean {panel.mean():.3g})', fontsize=9)
        bar = colorbar(fig, ax, im, ticks=ticks if own_norm is norm else None)
        bar.set_label('expected k' if name == EXPECTED else label, fontsize=8)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in axes[n:]:
        ax.axis('off')
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def draw_table(table: np.ndarray, key: str, title: str, path: Path) -> Path:
    """A (R, C) table as a heat map and one line per column over the rows; (R,) as bars."""
    rows_name, cols_name, value_name = TABLE_AXES.get(key, ('row', 'column', key))
    table = table.astype(np.float64) if table.dtype == bool else table
    if table.ndim == 1:
        fig, ax = plt.subplots(figsize=(6, 3.6))
        ax.bar(np.arange(len(table)), table)
        ax.set_xlabel(rows_name)
        ax.set_ylabel(value_name)
    else:
        table = table.reshape(table.shape[0], -1)
        R, C = table.shape
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        im = ax1.imshow(table.T, aspect='auto', cmap='viridis', interpolation='nearest')
        ax1.set_xlabel(rows_name)
        ax1.set_ylabel(cols_name)
        ax1.set_xticks(range(R))
        ax1.set_yticks(range(C))
        if R * C <= 120:
            for r in range(R):
                for c in range(C):
                    ax1.text(r, c, f'{table[r, c]:.2f}', ha='center', va='center', fontsize=6, color='w')
        colorbar(fig, ax1, im).set_label(value_name)
        for c in range(C):
            ax2.plot(range(R), table[:, c], marker='o', ms=3, label=f'{cols_name} {c}')
        ax2.set_xlabel(rows_name)
        ax2.set_ylabel(value_name)
        ax2.set_xticks(range(R))
        ax2.grid(alpha=0.3)
        if C <= 16:
            ax2.legend(fontsize=7, ncol=2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def visualize(
    model, cfg, images: Sequence[Path], out_dir: Path, weights: str, shape: Sequence[int] | None = None
) -> list[Path]:
    """Forward each image through the backbone and draw its statistics; returns the PNGs written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for image in images:
        data = prepare_inputs(model, cfg, image, shape)
        backbone, stats = forward_backbone(model, data)
        name = type(backbone).__name__
        if stats is None:
            print(f'{image}: {name} reports no statistics: nothing to draw')
            continue
        stem = Path(image).stem
        untrained = ' (untrained)' if weights.startswith('random') else ''
        scalars = ', '.join(f'{k}={float(v):.3g}' for k, v in stats.scalars.items())
        print(f'{image}: {name}{untrained}; scalars: {scalars or "none"}')
        for key, value in stats.token_maps.items():
            title = f"{name}{untrained} · token_maps['{key}'] · {Path(image).name}"
            written.append(
                draw_token_map(
                    data['image'],
                    value[0].detach().cpu().numpy(),
                    backbone.patch_size,
                    title,
                    key,
                    out_dir / f'{stem}_{safe_name(key)}.png',
                )
            )
        for key, value in stats.tables.items():
            title = f"{name}{untrained} · tables['{key}'] {tuple(value.shape)} · {Path(image).name}"
            written.append(
                draw_table(value.detach().cpu().numpy(), key, title, out_dir / f'{stem}_table_{safe_name(key)}.png')
            )
        if not stats.token_maps and not stats.tables:
            print(f'  {name} reports no token maps or tables (a dense backbone): nothing to draw')
    return written


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser('tools/analysis_tools/visualize_depth.py', __doc__)
    parser.add_argument('config', help='mmdet, mmseg or mmpretrain config file')
    parser.add_argument('checkpoint', help="checkpoint file, or 'none' for the random initialisation")
    parser.add_argument('images', nargs='*', metavar='IMAGE', help='image files (default: a toy val image)')
    parser.add_argument('--out-dir', default='work_dirs/visualize_depth', help='where the PNGs go')
    add_shape_option(parser, 'resize each image to exactly H [W] (default: the test pipeline)')
    parser.add_argument('--seed', type=int, default=0, help='torch seed of the random initialisation (default 0)')
    add_cfg_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> list[Path]:
    parser = build_parser()
    args = parser.parse_args(argv)
    shape = shape_arg(parser, args.shape)
    with bad_input(parser.prog):  # a wrong file, argument or checkpoint: one line
        images = [Path(image_file(p)) for p in args.images]
        cfg, scope, model, weights = load_model(
            args.config, checkpoint_file(args.checkpoint), args.cfg_options, args.seed
        )
    print(f'weights: {weights}')
    images = images or [default_image(scope, REPO / 'data')]
    written = visualize(model, cfg, images, Path(args.out_dir), weights, shape)
    for p in written:
        print(f'wrote {p}')
    return written


if __name__ == '__main__':
    main()
