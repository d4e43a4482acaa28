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


def _layout(grid: tuple[int, int], size: int, num_prefix: int, device: torch.device) -> tuple[Tensor, ...]:
    """The index tensors of a window layout (arithmetic on aranges: no host sync, traceable).

    Windows are row-major over the padded grid, slots row-major within a window. Returns:
        query_index (nW*s*s,): the token of each slot; a padding slot points at the first patch
            token (its query's output is never read, and as a key it is masked).
        key_index (nW*(P+s*s),): the same with the P prefix tokens first in every window.
        key_real (nW, P+s*s) bool: False at padding slots.
        window_of_token, slot_of_token (h*w,): where each patch token sits.
    """
    (h, w), s, P = grid, size, num_prefix
    nh, nw = -(-h // s), -(-w // s)
    rows = torch.arange(nh * s, device=device).view(nh, 1, s, 1)  # (window row, window col, slot row, slot col)
    cols = torch.arange(nw * s, device=device).view(1, nw, 1, s)
    real = ((rows < h) & (cols < w)).view(nh * nw, s * s)
    query_index = torch.where(real, (P + rows * w + cols).view(nh * nw, s * s), P)
    prefix = torch.arange(P, device=device).expand(nh * nw, P)
    key_index = torch.cat([prefix, query_index], 1).flatten()
    key_real = torch.cat([torch.ones_like(prefix, dtype=torch.bool), real], 1)
    r, c = torch.arange(h, device=device).view(h, 1), torch.arange(w, device=device).view(1, w)
    window_of_token = (r // s * nw + c // s).flatten()
    slot_of_token = (r % s * s + c % s).flatten()
    return query_index.flatten(), key_index, key_real, window_of_token, slot_of_token


def window_attention(q: Tensor, k: Tensor, v: Tensor, grid: tuple[int, int], size: int, num_prefix: int,
                     num_heads: int, key_valid: Tensor | None = None) -> Tensor:
    """Windowed multi-head attention of dense q, k, v (B, N, D), N = prefix + h*w -> (B, N, D).

    key_valid: (B, N) bool, keys that exist (the active tokens of a subset); None: all do. A query
    whose window has no valid key at all gets all of them (its output is not used by the caller,
    and a fully masked softmax row would be NaN in the backward pass).

    Each of q, k, v is gathered into its windows by one `index_select` (the prefix keys included,
    no padded copy of the grid), the windows go through one SDPA call, and one gather puts the
    patch outputs back in token order.
    """
    B, N, D = q.shape
    P, H, d = num_prefix, num_heads, D // num_heads
    query_index, key_index, key_real, window_of_token, slot_of_token = _layout(grid, size, P, q.device)
    M = B * key_real.shape[0]  # windows in the batch

    def windows(t: Tensor, index: Tensor) -> Tensor:  # (B, N, D) -> (M, heads, slots, D/heads)
        return t.index_select(1, index).view(M, -1, H, d).transpose(1, 2)

    mask = None
    if key_valid is not None or grid[0] % size or grid[1] % size:  # (M, P + s*s) keys that exist
        mask = key_real.repeat(B, 1)
        if key_valid is not None:
            mask = mask & key_valid.index_select(1, key_index).view(M, -1)
            mask = mask | ~mask.any(1, keepdim=True)
        mask = mask[:, None, None, :]
    out = F.scaled_dot_product_attention(windows(q, query_index), windows(k, key_index), windows(v, key_index),
                                         attn_mask=mask)  # (M, heads, s*s, D/heads)
    # (M, heads, s*s, d) -> (B, nW, s*s, heads, d), gathered to token order -> (B, h*w, D)
    out = out.view(B, -1, H, size * size, d).permute(0, 1, 3, 2, 4)[:, window_of_token, slot_of_token]
    out = out.reshape(B, -1, D)
    if not P:
        return out
    # Prefix queries: every (valid) key, as in a global block.
    prefix_mask = None if key_valid is None else (key_valid | ~key_valid.any(1, keepdim=True))[:, None, None, :]

    def heads(t: Tensor) -> Tensor:  # (B, n, D) -> (B, heads, n, D/heads)
        return t.view(B, t.shape[1], H, d).transpose(1, 2)

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
