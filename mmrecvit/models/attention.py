"""The one attention dispatch: `attend(q, k, v, layout, num_heads)`, multi-head attention of projected queries, keys
and values laid out as `layout` says (the layouts are plain data: `windows.Windows`, `windows.Global`,
`token_adaptive.TokenRows`).

`layers.Attention` is timm's `Attention` (its `qkv`/`proj` and its dense forward, every token attending to every
token, layout None) with ViTDet's relative position tables; for any other layout it projects the tokens and calls
`attend`, then `proj`:

* `Windows`: ViTDet's window attention, partitioned into windows for one fused SDPA call (`window_attention`);
* `Global`: global attention with the relative position biases of the grid (`global_attention`);
* `TokenRows`: the (T, D) rows of a token subset (`token_adaptive.py`), attending among themselves or over a
  key/value cache of the frozen tokens, each image on its own (`rows_attention`), in the subset's own layout.

Every path is SDPA on dense (M, heads, n, d) blocks. FlexAttention could express the window rule as a block mask
instead of the partition, but measured slower on the CPU, eager and compiled (ViT-S heads, 14 x 14 windows of a
28 x 28 grid), and the partitioned windows already hold no masked block: it is not used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from .rel_pos import grid_bias, merge_heads, pad_keys, position_bias, with_key_mask
from .token_adaptive import TokenRows, write_rows
from .windows import Global, Windows, partition, unpartition


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    layout: Any,
    num_heads: int,
    rel_pos: tuple[Tensor, Tensor] | None = None,
    attn_mask: Tensor | None = None,
) -> Tensor:
    """Attention of token-major q, k, v (..., D) -> (..., D), before the output projection.

    layout: `Windows` or `Global` for a dense (B, N, D) sequence, `TokenRows` for the (T, D) rows of a subset.
    rel_pos: the (rel_pos_h, rel_pos_w) tables of the attention (`rel_pos.py`), resized to each layout's extent.
    attn_mask: bool, True where a query may attend to a key (Edge-RecViT's masked reference: (B, 1, 1, N) keys).
    """
    if isinstance(layout, TokenRows):
        if attn_mask is not None:
            raise ValueError('a token subset attends as its kv_cache says: attn_mask is not supported')
        return rows_attention(q, k, v, layout, num_heads, rel_pos)
    if isinstance(layout, Windows):
        key_valid = None if attn_mask is None else attn_mask[:, 0, 0, :]
        return window_attention(q, k, v, layout.grid, layout.size, layout.num_prefix, num_heads, key_valid, rel_pos)
    if isinstance(layout, Global):
        return global_attention(q, k, v, layout, num_heads, rel_pos, attn_mask)
    raise TypeError(
        'layout must be None (dense), windows.Windows, windows.Global or token_adaptive.TokenRows, '
        f'got {type(layout).__name__}'
    )


def heads(t: Tensor, num_heads: int) -> Tensor:
    """(M, n, D) -> (M, heads, n, D/heads)."""
    return t.view(t.shape[0], t.shape[1], num_heads, -1).transpose(1, 2)


def global_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    layout: Global,
    num_heads: int,
    rel_pos: tuple[Tensor, Tensor] | None,
    attn_mask: Tensor | None = None,
) -> Tensor:
    """Global attention of dense q, k, v (B, N, D) with the relative position biases of `layout`'s grid added to
    the logits (a float mask, `attn_mask`'s False as -inf) -> (B, N, D)."""
    qh = heads(q, num_heads)
    if rel_pos is not None:
        attn_mask = with_key_mask(grid_bias(qh, layout.grid, layout.num_prefix, rel_pos), attn_mask)
    out = F.scaled_dot_product_attention(qh, heads(k, num_heads), heads(v, num_heads), attn_mask=attn_mask)
    return merge_heads(out, rel_pos is not None)  # (B, heads, N, D/heads) -> (B, N, D)


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
    """Windowed multi-head attention of dense q, k, v (B, N, D), N = prefix + h*w -> (B, N, D) (`windows.py`).

    rel_pos: the (rel_pos_h, rel_pos_w) tables of the attention, resized to the window (`rel_pos.py`).

    key_valid: (B, N) bool, keys that exist (the active tokens of a subset); None: all do. A query whose window has
    no valid key at all gets all of them (its output is not used by the caller, and a fully masked softmax row
    would be NaN in the backward pass).
    """
    B, N, D = q.shape
    P = num_prefix
    valid = torch.ones(B, N, dtype=torch.bool, device=q.device) if key_valid is None else key_valid
    # Patch queries: their window's keys plus the prefix keys.
    qw, kw, vw = (partition(t[:, P:], grid, size) for t in (q, k, v))  # (B*nW, s*s, D)
    valid_w = partition(valid[:, P:, None].to(q.dtype), grid, size)[..., 0] > 0.5  # (B*nW, s*s), padding False
    n_windows = qw.shape[0] // B
    if P:
        kw = torch.cat([kw, k[:, :P].repeat_interleave(n_windows, 0)], 1)
        vw = torch.cat([vw, v[:, :P].repeat_interleave(n_windows, 0)], 1)
        valid_w = torch.cat([valid_w, valid[:, :P].repeat_interleave(n_windows, 0)], 1)
    valid_w = valid_w | ~valid_w.any(1, keepdim=True)

    padded = grid[0] % size or grid[1] % size
    mask = valid_w[:, None, None, :] if key_valid is not None or padded else None
    qw = heads(qw, num_heads)
    if rel_pos is not None:  # the window's grid; the prefix keys (last) get no bias
        bias = pad_keys(grid_bias(qw, (size, size), 0, rel_pos), after=P)  # (B*nW, heads, s*s, s*s + P)
        mask = with_key_mask(bias, mask)
    out = F.scaled_dot_product_attention(qw, heads(kw, num_heads), heads(vw, num_heads), attn_mask=mask)
    out = unpartition(merge_heads(out, rel_pos is not None), grid, size)  # (B, h*w, D)
    if not P:
        return out
    # Prefix queries: every (valid) key, as in a global block.
    prefix_mask = None if key_valid is None else (valid | ~valid.any(1, keepdim=True))[:, None, None, :]
    prefix = F.scaled_dot_product_attention(
        heads(q[:, :P], num_heads), heads(k, num_heads), heads(v, num_heads), attn_mask=prefix_mask
    )
    return torch.cat([prefix.transpose(1, 2).reshape(B, P, D), out], 1)


def rows_attention(
    q: Tensor, k: Tensor, v: Tensor, rows: TokenRows, num_heads: int, rel_pos: tuple[Tensor, Tensor] | None = None
) -> Tensor:
    """Attention of the active rows q, k, v (T, D) of a token subset -> (T, D): among themselves, or over every
    token of their images with the cached keys/values of the frozen ones (`rows.kv_cache`); in windows, the queries
    on the dense grid (`rows_in_windows`)."""
    active, layout, cache = rows.active, rows.layout, rows.kv_cache
    if isinstance(layout, Windows):
        return rows_in_windows(q, k, v, rows, num_heads, rel_pos)
    q_counts = tuple(filter(None, active.counts))  # images without active tokens do not attend
    # Relative positions: the rows' token indices (keys: the same rows, or each image's tokens in order).
    tokens = None if layout is None else active.index % active.num_tokens
    if cache is None:
        return image_attention(q, k, v, q_counts, q_counts, num_heads, layout, rel_pos, tokens, tokens)
    # Fresh keys/values for the active rows, cached ones for the frozen rows.
    D, N = q.shape[-1], active.num_tokens
    kv = write_rows(cache.kv, active.index, torch.cat([k, v], -1), not torch.is_grad_enabled())  # (B*N, 2D)
    if len(q_counts) < active.batch_size:  # keep the keys of the images that attend
        keep = torch.cat([torch.arange(b * N, (b + 1) * N, device=q.device) for b, n in enumerate(active.counts) if n])
        kv = kv.index_select(0, keep)
    k, v = kv[:, :D].to(q.dtype), kv[:, D:].to(q.dtype)
    return image_attention(q, k, v, q_counts, (N,) * len(q_counts), num_heads, layout, rel_pos, tokens, None)


def image_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_counts: Sequence[int],
    k_counts: Sequence[int],
    num_heads: int,
    layout: Global | None = None,
    rel_pos: tuple[Tensor, Tensor] | None = None,
    q_tokens: Tensor | None = None,
    k_tokens: Tensor | None = None,
) -> Tensor:
    """Per-image attention of query rows q (Tq, D) over key/value rows k, v (Tk, D), both grouped by image
    (`q_counts`/`k_counts` rows each, every count > 0) -> (Tq, D).

    layout: a `Global` for the relative position biases, with the token index of every query row `q_tokens` (Tq,)
    and of every key row `k_tokens` (Tk,) (None: each image's keys are all its tokens in order).

    One batched call when all images have the same counts (always at batch 1), else one call per image: exact and
    wasting nothing (a key-padding mask would leave the fused kernel).
    """
    H, d = num_heads, q.shape[-1] // num_heads

    def bias(qh: Tensor, qs: slice, ks: slice, M: int) -> Tensor | None:
        kt = None if k_tokens is None else k_tokens[ks].view(M, -1)
        return position_bias(qh, q_tokens[qs].view(M, -1), layout.grid, layout.num_prefix, rel_pos, kt)

    biased = layout is not None and rel_pos is not None
    if q_counts.count(q_counts[0]) == len(q_counts) and k_counts.count(k_counts[0]) == len(k_counts):
        B, nq, nk = len(q_counts), q_counts[0], k_counts[0]
        # (B*n, D) -> (B, heads, n, D/heads)
        qh = q.view(B, nq, H, d).transpose(1, 2)
        out = F.scaled_dot_product_attention(
            qh,
            k.reshape(B, nk, H, d).transpose(1, 2),
            v.reshape(B, nk, H, d).transpose(1, 2),
            attn_mask=bias(qh, slice(None), slice(None), B) if biased else None,
        )
        return merge_heads(out, biased).reshape(B * nq, H * d)
    outs, qo, ko = [], 0, 0
    for nq, nk in zip(q_counts, k_counts):
        # (n, D) -> (1, heads, n, D/heads)
        qb, kb, vb = (
            t.reshape(1, -1, H, d).transpose(1, 2) for t in (q[qo : qo + nq], k[ko : ko + nk], v[ko : ko + nk])
        )
        mask = bias(qb, slice(qo, qo + nq), slice(ko, ko + nk), 1) if biased else None
        out = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask)
        outs.append(out[0].transpose(0, 1).reshape(nq, H * d))
        qo, ko = qo + nq, ko + nk
    return torch.cat(outs)


def rows_in_windows(
    q: Tensor, k: Tensor, v: Tensor, rows: TokenRows, num_heads: int, rel_pos: tuple[Tensor, Tensor] | None = None
) -> Tensor:
    """Windowed attention of the active rows: their queries scattered onto the dense grid, the keys of every token
    (cached) or of the active ones, `window_attention`, the active rows back. The attention then costs what the
    dense windowed block's does; qkv, MLP and norms still run for the active rows only."""
    active, w = rows.active, rows.layout
    B, N, D = active.batch_size, active.num_tokens, q.shape[-1]
    dense_q = q.new_zeros(B * N, D).index_copy(0, active.index, q).view(B, N, D)
    if rows.kv_cache is None:
        kv = q.new_zeros(B * N, 2 * D).index_copy(0, active.index, torch.cat([k, v], -1))
        key_valid = active.mask()
    else:
        grad_free = not torch.is_grad_enabled()
        kv = write_rows(rows.kv_cache.kv, active.index, torch.cat([k, v], -1), grad_free).to(q.dtype)
        key_valid = None
    kv = kv.view(B, N, 2 * D)
    out = window_attention(
        dense_q, kv[..., :D], kv[..., D:], w.grid, w.size, w.num_prefix, num_heads, key_valid, rel_pos
    )
    return out.reshape(B * N, D).index_select(0, active.index)
