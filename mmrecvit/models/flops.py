"""The one analytic FLOP model: what a forward really computed, per image.

**Convention** (the only one in mmrecvit): FLOPs = 2 x the multiply-accumulates (MACs) of the
matrix products -- linear layers, convolutions, and attention's q.k^T and attn.v. Norms, softmax,
activations, residual adds and other elementwise ops are not counted. This is the papers'
convention (DeiT-S at 224^2: 9.2 GFLOPs). mmengine's and fvcore's counters (mmdet's and mmseg's
`get_flops.py`) count 1 MAC as 1 FLOP: their tables show `Work.macs`, i.e. FLOPs / 2.

A backbone's forward records its work in `ForwardStats.work` as a list of entries:

* `BlockWork`, one per block application: the tokens it ran on (queries), the tokens it attended
  over (keys), the frozen tokens whose keys/values it projected for a cache (new_kv);
* `OpWork` for everything else it computed: the patch embedding, routers, rankers, step
  transforms, expert merges (name = the module, e.g. 'patch_embed', 'routers.2').

Counts are means over the images of the batch (token-adaptive models give images different
amounts of work); work done once per forward for the whole batch (reViT's expert merge) is
divided by the batch size. Every tool, benchmark and table reads `ForwardStats.flops`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Union

import torch
from torch import nn


def _as_floats(work: object, names: Sequence[str]) -> None:
    """Counts as Python floats (torch.jit traces hand in 0-d tensors); kept symbolic while
    torch.export/compile traces, where float() would specialise the graph to one input size."""
    if not torch.compiler.is_compiling():
        for name in names:
            object.__setattr__(work, name, float(getattr(work, name)))


@dataclass(frozen=True)
class BlockWork:
    """One application of a pre-norm transformer block (width `dim`, MLP hidden width `mlp_hidden`).

    queries: tokens whose qkv projection, output projection and MLP ran.
    keys: tokens attended over (the queries, plus any cached keys/values).
    new_kv: tokens whose keys/values were projected without being queried (entering a cache).
    attn_pairs: query-key pairs, when images attend over different numbers of tokens (mean of
        the per-image products); None means `queries * keys`.
    rel_pos_queries, rel_pos_keys: relative position biases (`rel_pos.py`): the queries whose terms
        q . Rh, q . Rw were computed and the axis keys (h_k + w_k) each ran over (0: no biases).
    """

    dim: int
    mlp_hidden: int
    queries: float
    keys: float
    new_kv: float = 0.0
    attn_pairs: float | None = None
    rel_pos_queries: float = 0.0
    rel_pos_keys: float = 0.0

    def __post_init__(self) -> None:
        _as_floats(
            self,
            ('queries', 'keys', 'new_kv', 'rel_pos_queries', 'rel_pos_keys')
            + (('attn_pairs',) if self.attn_pairs is not None else ()),
        )

    @classmethod
    def mean(cls, works: Sequence[BlockWork]) -> BlockWork:
        """The work of one application over a batch from the per-image works (same block and layout)."""
        n = len(works)
        return replace(
            works[0],
            **{
                name: sum(getattr(w, name) for w in works) / n
                for name in ('queries', 'keys', 'new_kv', 'rel_pos_queries')
            },
            attn_pairs=sum(w.queries * w.keys if w.attn_pairs is None else w.attn_pairs for w in works) / n,
        )

    @property
    def macs(self) -> float:
        D, q = self.dim, self.queries
        pairs = q * self.keys if self.attn_pairs is None else self.attn_pairs
        return (
            3 * D * D * q  # qkv projection of the queried tokens
            + 2 * D * D * self.new_kv  # k/v projection of tokens entering the cache
            + 2 * pairs * D  # q @ k^T and attn @ v
            + D * self.rel_pos_queries * self.rel_pos_keys  # q . Rh and q . Rw (relative positions)
            + D * D * q  # output projection
            + 2 * D * self.mlp_hidden * q
        )  # fc1 + fc2

    @property
    def flops(self) -> float:
        return 2.0 * self.macs


@dataclass(frozen=True)
class OpWork:
    """Any other computation of a forward: `name` (the module) and its multiply-accumulates."""

    name: str
    macs: float

    def __post_init__(self) -> None:
        _as_floats(self, ('macs',))

    @property
    def flops(self) -> float:
        return 2.0 * self.macs


Work = Union[BlockWork, OpWork]


def linear_work(name: str, rows: float, in_features: int, out_features: int) -> OpWork:
    """A linear layer applied to `rows` tokens (bias not counted)."""
    return OpWork(name, rows * in_features * out_features)


def conv_work(name: str, conv: nn.Conv2d, out_hw: Sequence[int]) -> OpWork:
    """A 2-d convolution producing an `out_hw` map (bias not counted)."""
    kh, kw = conv.kernel_size
    return OpWork(name, (conv.in_channels // conv.groups) * kh * kw * conv.out_channels * out_hw[0] * out_hw[1])


def dense_work(dim: int, mlp_hidden: int, tokens: int, depth: int) -> list[BlockWork]:
    """`depth` block applications, each over all `tokens` (a plain ViT)."""
    return [BlockWork(dim, mlp_hidden, tokens, tokens) for _ in range(depth)]


def total_flops(work: Iterable[Work]) -> float:
    """FLOPs (2 x MACs, the module docstring's convention) of a list of entries."""
    return 2.0 * sum(w.macs for w in work)
