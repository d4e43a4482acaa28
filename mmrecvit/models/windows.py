"""Window attention (ViTDet): the patch grid attends within non-overlapping windows.

A windowed block application partitions the h x w patch grid into `size` x `size` windows (the grid
padded at the bottom/right to a multiple of `size`; padded positions are masked out as keys, so
the result does not depend on the padding). Patch tokens attend to the tokens of their window plus
the prefix tokens (CLS); a prefix token attends to every token, as in a global block. Which
applications are windowed is the backbone's schedule (`ViTBackbone.window_size`, `global_steps`).
With relative position biases (`use_rel_pos`, `rel_pos.py`) the tables are resized to the window
(patch-patch pairs only: prefix keys and queries get none), and a global step gets a `Global` layout
that carries the grid the biases need; without them a global step has no layout (plain SDPA).

`Windows.attend` is the `rows` protocol of `layers.Block`/`layers.Attention` for a dense (B, N, D)
sequence; the token-adaptive engine (`token_adaptive.TokenRows`) calls `window_attention` with its
scattered subset queries and its (cached) keys, so windows and token subsets combine.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import drop_path
from timm.models.vision_transformer_sam import window_partition, window_unpartition
from torch import Tensor

from .rel_pos import merge_heads, query_terms, token_coords, with_key_mask


def _partition(x: Tensor, grid: tuple[int, int], size: int) -> Tensor:
    """(B, h*w, C) patch rows -> (B * nW, size*size, C) windows of the zero-padded grid (timm's ViTDet/SAM
    `window_partition`)."""
    windows, _ = window_partition(x.reshape(x.shape[0], *grid, x.shape[-1]), size)  # (B*nW, s, s, C)
    return windows.flatten(1, 2)


def _merge(x: Tensor, batch: int, grid: tuple[int, int], size: int) -> Tensor:
    """Inverse of `_partition`: (B * nW, size*size, C) -> (B, h*w, C), padding cropped (`window_unpartition`)."""
    padded = (grid[0] + -grid[0] % size, grid[1] + -grid[1] % size)
    return window_unpartition(x.unflatten(1, (size, size)), size, grid, padded).flatten(1, 2)


def window_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    grid: tuple[int, int],
    size: int,
    num_prefix: int,
    num_heads: int,
    key_valid: Tensor | None = None,
    rel_pos: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    """Windowed multi-head attention of dense q, k, v (B, N, D), N = prefix + h*w -> (B, N, D).

    rel_pos: the (rel_pos_h, rel_pos_w) tables of the attention, resized to the window (`rel_pos.py`).

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
    qw = heads(qw)
    if rel_pos is not None:  # window positions 0..s-1 on both axes; the prefix keys (last) get none
        coords = token_coords(torch.arange(size * size, device=q.device), (size, size), 0)[None]
        bias = F.pad(query_terms(qw, coords, rel_pos, (size, size)), (0, P))  # (B*nW, heads, s*s, s*s + P)
        mask = with_key_mask(bias.to(q.dtype), mask)
    out = F.scaled_dot_product_attention(qw, heads(kw), heads(vw), attn_mask=mask)
    out = _merge(merge_heads(out, rel_pos is not None), B, grid, size)  # (B, h*w, D)
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

    def rel_pos_work(self) -> tuple[float, float]:
        """(queries, axis keys per query) of the relative position terms per image: every window position
        (padded ones included), over s + s keys (`rel_pos.py`)."""
        return self.num_windows * self.size * self.size, 2 * self.size  # floats in BlockWork (symbolic if traced)

    def attend(self, attn: Any, x: Tensor, attn_mask: Tensor | None = None) -> Tensor:
        """`Attention.forward` for a windowed application of a dense (B, N, D) sequence.

        attn_mask: (B, 1, 1, N) bool key mask (Edge-RecViT's masked reference without frozen keys).
        """
        q, k, v = attn.project_qkv(x).chunk(3, dim=-1)
        key_valid = None if attn_mask is None else attn_mask[:, 0, 0, :]
        return attn.proj(
            window_attention(q, k, v, self.grid, self.size, self.num_prefix, attn.num_heads, key_valid, attn.rel_pos)
        )

    drop_path = staticmethod(drop_path)


class Global:
    """The global layout of one block application on a `grid` patch grid with `num_prefix` prefix tokens: what
    a global step with relative position biases needs (each token's grid position); the same `attend` /
    `pairs` protocol as `Windows`."""

    def __init__(self, grid: tuple[int, int], num_prefix: int) -> None:
        self.grid, self.num_prefix = tuple(grid), num_prefix

    @property
    def num_tokens(self) -> int:
        return self.grid[0] * self.grid[1] + self.num_prefix

    def pairs(self) -> float:
        return self.num_tokens * self.num_tokens  # floats in BlockWork (kept symbolic while tracing)

    def rel_pos_work(self, queries: float | None = None) -> tuple[float, float]:
        """(queries, axis keys per query) of the relative position terms per image: every query (default all
        tokens; prefix ones are computed and zeroed) over h + w keys (`rel_pos.py`)."""
        return self.num_tokens if queries is None else queries, self.grid[0] + self.grid[1]

    def bias(self, attn: Any, q: Tensor, q_tokens: Tensor, k_tokens: Tensor | None = None) -> Tensor:
        """The logit bias (M, heads, nq, nk) of queries q (M, heads, nq, d) that are the tokens `q_tokens`
        (G, nq) (indices into prefix + grid; G = 1 or M) over the keys `k_tokens` (G, nk), or over all the
        tokens in order when None."""
        coords = token_coords(q_tokens, self.grid, self.num_prefix)
        bias = F.pad(query_terms(q, coords, attn.rel_pos, self.grid), (self.num_prefix, 0)).to(q.dtype)
        if k_tokens is None:
            return bias  # (M, heads, nq, N): the keys in token order, prefix keys (first) without bias
        return bias.gather(-1, k_tokens[:, None, None, :].expand(*bias.shape[:-1], -1))

    def attend(self, attn: Any, x: Tensor, attn_mask: Tensor | None = None) -> Tensor:
        """`Attention.forward` for a global application of a dense (B, N, D) sequence with the biases.

        attn_mask: bool, True where a query may attend (Edge-RecViT's masked reference), combined as -inf.
        """
        return attn.attend_dense(x, attn_mask, self)

    drop_path = staticmethod(drop_path)
