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

Work: per query, `dim x (h_k + w_k)` multiply-accumulates for the two products over a key extent
`h_k x w_k` (`flops.BlockWork.rel_pos_queries/rel_pos_keys`); the resize, the gather and the add to the
logits are elementwise (not counted, `flops.py`).
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


def query_terms(q: Tensor, coords: Tensor, tables: tuple[Tensor, Tensor], extent: tuple[int, int]) -> Tensor:
    """The decomposed bias of queries q (M, heads, nq, d) at grid positions `coords` (G, nq, 2) (G = 1 or M)
    over every key of an `extent` (h_k, w_k) grid, row-major -> (M, heads, nq, h_k * w_k):
    `q . Rh[qh - kh] + q . Rw[qw - kw]`; 0 for queries without a position (prefix tokens)."""
    rel_h = _axis_terms(q, coords[..., 0], tables[0], extent[0])  # (M, heads, nq, h_k)
    rel_w = _axis_terms(q, coords[..., 1], tables[1], extent[1])  # (M, heads, nq, w_k)
    bias = (rel_h[..., :, None] + rel_w[..., None, :]).flatten(-2)  # (M, heads, nq, h_k * w_k)
    no_position = (coords[..., 0] < 0)[:, None, :, None]  # (G, 1, nq, 1)
    return bias.masked_fill(no_position, 0.0)


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
    bias = F.pad(query_terms(q, coords, tables, grid), (num_prefix, 0)).to(q.dtype)
    if k_tokens is None:
        return bias  # (M, heads, nq, N)
    return bias.gather(-1, k_tokens[:, None, None, :].expand(*bias.shape[:-1], -1))


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
