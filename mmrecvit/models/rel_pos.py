"""Decomposed relative position biases as ViTDet has them (Li et al., ECCV 2022, §3; from MViTv2, §3.1).

For a query at grid position (qh, qw) and a key at (kh, kw) the attention logit gains
`q . Rh[qh - kh] + q . Rw[qw - kw]`: two tables `rel_pos_h` (2*Sh - 1, head_dim) and `rel_pos_w`
(2*Sw - 1, head_dim), shared by the heads, with the *unscaled* query (detectron2's
`add_decomposed_rel_pos`). Decisions where ViTDet is silent or differs from us (docs/methods/README.md, issue 28):

* **One pair of tables per block** (parameters of the block's `Attention`, `Sh x Sw` = the pretraining
  grid), shared by every application of the block -- windowed and global steps, every recursion -- and
  resized to each application's key extent (the window size, or the global grid of the input at hand)
  by linear interpolation, as ViTDet's `get_rel_pos` resizes its tables (ViTDet keeps one size per
  block: 2*14 - 1 in windowed blocks, 2*64 - 1 in global ones).
* **Zero-initialised**, so a DeiT/MAE start computes exactly what it computed without them.
* **Prefix tokens (CLS) have no position**: a pair with a prefix query or key gets no bias; only
  patch-patch pairs do (ViTDet has no CLS token).
* Queries are addressed by their own grid position, so a token subset (`token_adaptive.TokenRows`)
  gets the biases of its tokens' positions.

Two forms of one computation: a whole grid's queries in order (a global step, the windows) as ViTDet
writes it, the tables gathered once per axis (`grid_bias`); a token subset's queries each gathering the
table rows of its own position (`position_bias`: prefix queries computed, then zeroed). The first is the
fast one: a per-query gather is (queries, h_k, d) per axis, kept for the backward, whose gradient is a
scatter-add into the table.

Work: per patch query (and per query of a subset), `dim x (h_k + w_k)` multiply-accumulates for the two
products over a key extent `h_k x w_k` (`flops.BlockWork.rel_pos_queries/rel_pos_keys`); the resize, the
gather and the add to the logits are elementwise (not counted, `flops.py`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def resize(table: Tensor, length: int) -> Tensor:
    """(L, d) table -> (length, d), linear interpolation as ViTDet's `get_rel_pos` (at the same length the
    interpolation is the identity; always run, so a traced graph does not specialise on the input size)."""
    return F.interpolate(table.t()[None], size=length, mode='linear')[0].t()


def token_coords(tokens: Tensor, grid: tuple[int, int], num_prefix: int) -> Tensor:
    """Token indices (...) of a sequence of `num_prefix` prefix tokens then the row-major `grid` -> (..., 2)
    grid positions (row, column); -1 for prefix tokens (they have none)."""
    patch = tokens - num_prefix
    row = torch.div(patch, grid[1], rounding_mode='floor')
    coords = torch.stack([row, patch - row * grid[1]], -1)  # not `%`: ONNX has no remainder by a symbolic size
    return torch.where(patch[..., None] >= 0, coords, torch.full_like(coords, -1))


def _axis_terms(q: Tensor, coord: Tensor, table: Tensor, extent: int) -> Tensor:
    """q (M, heads, nq, d) at positions `coord` (G, nq) along one axis (G = 1 or M) -> (M, heads, nq, extent):
    q . R[coord - k] for every key position k = 0..extent-1, R the table resized to 2 * extent - 1."""
    M, H, nq, d = q.shape
    G = coord.shape[0]
    offsets = coord[..., None] - torch.arange(extent, device=q.device) + (extent - 1)  # (G, nq, extent)
    rel = resize(table, 2 * extent - 1)[offsets.clamp(min=0)]  # (G, nq, extent, d); prefix rows zeroed later
    # One product per query position: (M, heads, nq, d) -> (G * nq, M/G * heads, d)
    qg = q.reshape(M // G, G, H, nq, d).permute(1, 3, 0, 2, 4).reshape(G * nq, (M // G) * H, d)
    out = torch.bmm(qg, rel.to(q.dtype).reshape(G * nq, extent, d).transpose(1, 2))  # (G*nq, M/G*heads, extent)
    return out.reshape(G, nq, M // G, H, extent).permute(2, 0, 3, 1, 4).reshape(M, H, nq, extent)


def _pairs(table: Tensor, extent: int) -> Tensor:
    """(L, d) table -> (extent, extent, d): R[i - k] for every query position i and key position k of one axis
    (ViTDet's `get_rel_pos`)."""
    pos = torch.arange(extent, device=table.device)
    return resize(table, 2 * extent - 1)[pos[:, None] - pos[None, :] + (extent - 1)]


def grid_bias(q: Tensor, grid: tuple[int, int], num_prefix: int, tables: tuple[Tensor, Tensor]) -> Tensor:
    """The logit bias (M, heads, N, N) of every token's query q (M, heads, N, d), N = `num_prefix` + h * w in order,
    over the same tokens as keys: ViTDet's `add_decomposed_rel_pos` for the patch queries of the row-major `grid`
    (the tables gathered once per axis, (h, h, d) and (w, w, d), where `query_terms` gathers them per query), zero
    for the prefix tokens as queries and as keys."""
    M, H, _, d = q.shape
    h, w = grid
    patches = q[:, :, num_prefix:].reshape(M, H, h, w, d)
    Rh, Rw = (_pairs(table, n).to(q.dtype) for table, n in zip(tables, grid))  # (h, h, d), (w, w, d)
    # einsum's outputs are views of its batched products (h or w outermost), in autocast's dtype: made q's dtype and
    # contiguous while small, so that the broadcast sum comes out in the (nq, nk) order the view to
    # (M, heads, h * w, h * w) needs (not a second copy of that size)
    rel_h = torch.einsum('mnhwd,hkd->mnhwk', patches, Rh).to(q.dtype).contiguous()  # (M, heads, h, w, h)
    rel_w = torch.einsum('mnhwd,wkd->mnhwk', patches, Rw).to(q.dtype).contiguous()  # (M, heads, h, w, w)
    bias = (rel_h[..., :, None] + rel_w[..., None, :]).view(M, H, h * w, h * w)
    return F.pad(bias, (num_prefix, 0, num_prefix, 0)) if num_prefix else bias


def query_terms(q: Tensor, coords: Tensor, tables: tuple[Tensor, Tensor], extent: tuple[int, int]) -> Tensor:
    """The decomposed bias of queries q (M, heads, nq, d) at grid positions `coords` (G, nq, 2) (G = 1 or M)
    over every key of an `extent` (h_k, w_k) grid, row-major -> (M, heads, nq, h_k * w_k):
    `q . Rh[qh - kh] + q . Rw[qw - kw]`; 0 for queries without a position (prefix tokens)."""
    no_position = (coords[..., 0] < 0)[:, None, :, None]  # (G, 1, nq, 1)
    # Zeroed before the broadcast add (0 + 0), so that the (nq, h_k * w_k) sum is the one copy of that size
    rel_h = _axis_terms(q, coords[..., 0], tables[0], extent[0]).masked_fill(no_position, 0.0)  # (M, heads, nq, h_k)
    rel_w = _axis_terms(q, coords[..., 1], tables[1], extent[1]).masked_fill(no_position, 0.0)  # (M, heads, nq, w_k)
    return (rel_h[..., :, None] + rel_w[..., None, :]).flatten(-2)  # (M, heads, nq, h_k * w_k)


def position_bias(
    q: Tensor,
    q_tokens: Tensor,
    grid: tuple[int, int],
    num_prefix: int,
    tables: tuple[Tensor, Tensor],
    k_tokens: Tensor | None = None,
) -> Tensor:
    """The logit bias (M, heads, nq, nk) of queries q (M, heads, nq, d) that are the tokens `q_tokens` (G, nq)
    (indices into `num_prefix` prefix tokens then the row-major `grid`; G = 1 or M) over the keys `k_tokens`
    (G, nk), or over all the tokens in order when None (prefix keys first, without bias)."""
    coords = token_coords(q_tokens, grid, num_prefix)
    bias = pad_keys(query_terms(q, coords, tables, grid), before=num_prefix).to(q.dtype)
    if k_tokens is None:
        return bias  # (M, heads, nq, N)
    return bias.gather(-1, k_tokens[:, None, None, :].expand(*bias.shape[:-1], -1))


def pad_keys(bias: Tensor, before: int = 0, after: int = 0) -> Tensor:
    """Zero bias for the prefix keys, `before` or `after` the grid's keys (F.pad copies even when both are 0)."""
    return F.pad(bias, (before, after)) if before or after else bias


def with_key_mask(bias: Tensor, mask: Tensor | None) -> Tensor:
    """A float logit bias and a bool mask (True = may attend, broadcastable) -> one float mask for SDPA."""
    return bias if mask is None else bias.masked_fill(~mask, float('-inf'))


def merge_heads(out: Tensor, biased: bool) -> Tensor:
    """SDPA's (M, heads, n, d) -> (M, n, heads * d). With a bias (a float mask) through a copy: torch.export
    otherwise keeps a view whose strides its decomposed SDPA does not produce (the ONNX export fails)."""
    out = out.transpose(1, 2)
    if biased:
        out = out.clone(memory_format=torch.contiguous_format)
    return out.reshape(*out.shape[:2], -1)
