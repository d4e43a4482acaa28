"""Window attention (ViTDet): the patch grid attends within non-overlapping windows.

A windowed block application partitions the h x w patch grid into `size` x `size` windows (the grid
padded at the bottom/right to a multiple of `size`; padded positions are masked out as keys, so
the result does not depend on the padding). Patch tokens attend to the tokens of their window plus
the prefix tokens (CLS); a prefix token attends to every token, as in a global block. Which
applications are windowed is the backbone's schedule (`ViTBackbone.window_size`, `global_steps`);
relative position biases are not used (absolute positions, as in DeiT).

`Windows.attend` is the `rows` protocol of `layers.Block`/`layers.Attention` for a dense (B, N, D)
sequence; the token-adaptive engine (`token_adaptive.TokenRows`) calls `window_attention` with its
scattered subset queries and its (cached) keys, so windows and token subsets combine.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import drop_path
from torch import Tensor


def _partition(x: Tensor, grid: tuple[int, int], size: int) -> Tensor:
    """(B, h*w, C) patch rows -> (B * nW, size*size, C) windows (zero-padded grid)."""
    B, _, C = x.shape
    h, w = grid
    ph, pw = -h % size, -w % size
    x = x.reshape(B, h, w, C)
    if ph or pw:
        x = F.pad(x, (0, 0, 0, pw, 0, ph))
    H, W = h + ph, w + pw
    # (B, H, W, C) -> (B, H/s, s, W/s, s, C) -> (B, H/s, W/s, s, s, C) -> (B*nW, s*s, C)
    x = x.view(B, H // size, size, W // size, size, C).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, size * size, C)


def _merge(x: Tensor, batch: int, grid: tuple[int, int], size: int) -> Tensor:
    """Inverse of `_partition`: (B * nW, size*size, C) -> (B, h*w, C), padding cropped."""
    h, w = grid
    H, W = h + (-h % size), w + (-w % size)
    C = x.shape[-1]
    x = x.view(batch, H // size, W // size, size, size, C).permute(0, 1, 3, 2, 4, 5).reshape(batch, H, W, C)
    return x[:, :h, :w].reshape(batch, h * w, C)


def window_attention(q: Tensor, k: Tensor, v: Tensor, grid: tuple[int, int], size: int, num_prefix: int,
                     num_heads: int, key_valid: Tensor | None = None) -> Tensor:
    """Windowed multi-head attention of dense q, k, v (B, N, D), N = prefix + h*w -> (B, N, D).

    key_valid: (B, N) bool, keys that exist (the active tokens of a subset); None: all do. A query
    whose window has no valid key at all gets all of them (its output is not used by the caller,
    and a fully masked softmax row would be NaN in the backward pass).
    """
    B, N, D = q.shape
    P, H, d = num_prefix, num_heads, D // num_heads
    valid = torch.ones(B, N, dtype=torch.bool, device=q.device) if key_valid is None else key_valid
    # Patch queries: their window's keys plus the prefix keys.
    qw, kw, vw = (_partition(t[:, P:], grid, size) for t in (q, k, v))  # (B*nW, s*s, D)
    valid_w = _partition(valid[:, P:, None].to(q.dtype), grid, size)[..., 0] > 0.5  # (B*nW, s*s), padding False
    n_windows = qw.shape[0] // B
    if P:
        kw = torch.cat([kw, k[:, :P].repeat_interleave(n_windows, 0)], 1)
        vw = torch.cat([vw, v[:, :P].repeat_interleave(n_windows, 0)], 1)
        valid_w = torch.cat([valid_w, valid[:, :P].repeat_interleave(n_windows, 0)], 1)
    valid_w = valid_w | ~valid_w.any(1, keepdim=True)

    def heads(t: Tensor) -> Tensor:  # (M, n, D) -> (M, heads, n, d)
        return t.view(t.shape[0], t.shape[1], H, d).transpose(1, 2)

    padded = grid[0] % size or grid[1] % size
    mask = valid_w[:, None, None, :] if key_valid is not None or padded else None
    out = F.scaled_dot_product_attention(heads(qw), heads(kw), heads(vw), attn_mask=mask)
    out = _merge(out.transpose(1, 2).reshape(qw.shape[0], -1, D), B, grid, size)  # (B, h*w, D)
    if not P:
        return out
    # Prefix queries: every (valid) key, as in a global block.
    prefix_mask = None if key_valid is None else (valid | ~valid.any(1, keepdim=True))[:, None, None, :]
    prefix = F.scaled_dot_product_attention(heads(q[:, :P]), heads(k), heads(v), attn_mask=prefix_mask)
    return torch.cat([prefix.transpose(1, 2).reshape(B, P, D), out], 1)


class Windows:
    """The window layout of one block application on an `grid` patch grid with `num_prefix` prefix tokens."""

    def __init__(self, grid: tuple[int, int], size: int, num_prefix: int) -> None:
        self.grid, self.size, self.num_prefix = tuple(grid), size, num_prefix

    @property
    def num_windows(self) -> int:
        h, w = self.grid
        return -(-h // self.size) * -(-w // self.size)

    def pairs(self) -> float:
        """Query-key pairs computed per image (padded window positions included, as they are computed)."""
        s2, P = self.size * self.size, self.num_prefix
        tokens = self.grid[0] * self.grid[1] + P
        return float(self.num_windows * s2 * (s2 + P) + P * tokens)

    def attend(self, attn: Any, x: Tensor, attn_mask: Tensor | None = None) -> Tensor:
        """`Attention.forward` for a windowed application of a dense (B, N, D) sequence.

        attn_mask: (B, 1, 1, N) bool key mask (Edge-RecViT's masked reference without frozen keys).
        """
        q, k, v = attn.project_qkv(x).chunk(3, dim=-1)
        key_valid = None if attn_mask is None else attn_mask[:, 0, 0, :]
        return attn.proj(window_attention(q, k, v, self.grid, self.size, self.num_prefix, attn.num_heads, key_valid))

    drop_path = staticmethod(drop_path)
