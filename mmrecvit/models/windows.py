"""Attention layouts of a dense (B, N, D) sequence as plain data: ViTDet's windows, and the global grid that relative
position biases need.

A windowed block application partitions the h x w patch grid into `size` x `size` windows (the grid padded at the
bottom/right to a multiple of `size`; padded positions are masked out as keys, so the result does not depend on the
padding). Patch tokens attend to the tokens of their window plus the prefix tokens (CLS); a prefix token attends to
every token, as in a global block. Which applications are windowed is the backbone's schedule
(`ViTBackbone.window_size`, `global_steps`). With relative position biases (`use_rel_pos`, `rel_pos.py`) the tables
are resized to the window (patch-patch pairs only: prefix keys and queries get none), and a global step gets a
`Global` layout that carries the grid the biases need; without them a global step has no layout (timm's dense
attention). What each layout computes is `attention.attend`'s; here is only what it is and what it counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor


@dataclass(frozen=True)
class Windows:
    """The window layout of one block application on a `grid` patch grid with `num_prefix` prefix tokens."""

    grid: tuple[int, int]
    size: int
    num_prefix: int

    @property
    def num_windows(self) -> int:
        rows, cols = windows_per_axis(self.grid, self.size)
        return rows * cols

    def pairs(self) -> float:
        """Query-key pairs computed per image (padded window positions included, as they are computed)."""
        s2, P = self.size * self.size, self.num_prefix
        tokens = self.grid[0] * self.grid[1] + P
        return float(self.num_windows * s2 * (s2 + P) + P * tokens)

    def rel_pos_work(self) -> tuple[float, float]:
        """(queries, axis keys per query) of the relative position terms per image: every window position
        (padded ones included), over s + s keys (`rel_pos.py`)."""
        return self.num_windows * self.size * self.size, 2 * self.size  # floats in BlockWork (symbolic if traced)


@dataclass(frozen=True)
class Global:
    """The global layout of one block application on a `grid` patch grid with `num_prefix` prefix tokens: what a
    global step with relative position biases needs (each token's grid position)."""

    grid: tuple[int, int]
    num_prefix: int

    @property
    def num_tokens(self) -> int:
        return self.grid[0] * self.grid[1] + self.num_prefix

    def pairs(self) -> float:
        return self.num_tokens * self.num_tokens  # floats in BlockWork (kept symbolic while tracing)

    def rel_pos_work(self, queries: float | None = None) -> tuple[float, float]:
        """(queries, axis keys per query) of the relative position terms per image over h + w keys
        (`rel_pos.py`): the patch queries of a dense global step (`grid_bias`), or the given `queries` of a
        token subset (prefix ones computed and zeroed, `position_bias`)."""
        return self.grid[0] * self.grid[1] if queries is None else queries, self.grid[0] + self.grid[1]


def partition(x: Tensor, grid: tuple[int, int], size: int) -> Tensor:
    """(B, h*w, C) patch rows -> (B * nW, size*size, C) windows of the zero-padded grid: timm's ViTDet/SAM
    `window_partition`, written by hand with the padding from the window counts (ceil) instead of timm's
    ``(size - h % size) % size``, over which torch.export's symbolic shape reasoning spent most of a windowed
    export (docs/deployment.md)."""
    B, C = x.shape[0], x.shape[-1]
    rows, cols = windows_per_axis(grid, size)
    x = F.pad(x.reshape(B, *grid, C), (0, 0, 0, cols * size - grid[1], 0, rows * size - grid[0]))
    return x.reshape(B, rows, size, cols, size, C).transpose(2, 3).reshape(B * rows * cols, size * size, C)


def unpartition(x: Tensor, grid: tuple[int, int], size: int) -> Tensor:
    """Inverse of `partition`: (B * nW, size*size, C) -> (B, h*w, C), padding cropped (timm's `window_unpartition`)."""
    rows, cols = windows_per_axis(grid, size)
    C = x.shape[-1]
    x = x.reshape(-1, rows, cols, size, size, C).transpose(2, 3).reshape(-1, rows * size, cols * size, C)
    return x[:, : grid[0], : grid[1]].flatten(1, 2)


def windows_per_axis(grid: tuple[int, int], size: int) -> tuple[int, int]:
    """Windows along the grid's height and width, the last one padded (ceil)."""
    return (grid[0] + size - 1) // size, (grid[1] + size - 1) // size
