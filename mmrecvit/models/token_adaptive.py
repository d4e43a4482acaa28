"""Token-adaptive execution: one block application for a subset of the tokens (docs/methods/edge_recvit.md, mor_vit.md).

The masked reference of a token-adaptive model computes every token at every step and throws the
result away for tokens that are not active (`h <- h + a * (Block(h) - h)` with a = 0). This module
does the same arithmetic only where it is needed, so skipped tokens become real savings:

* queries, both LayerNorms, the output projection and the MLP run for the **active** tokens only;
* keys/values come either from all tokens (the active tokens' fresh projections plus a `KVCache`
  of the frozen tokens, docs/methods/edge_recvit.md: exited tokens stay in the sequence as keys/values) or from the
  active tokens only (`kv_cache=None`, docs/methods/mor_vit.md: MoR's attention among the selected tokens);
* an optional per-token residual gate gives `h <- h + g * (Block(h) - h)` (MoR, docs/methods/mor_vit.md).

Data layout (decision): position-wise work runs on the active tokens of the *whole batch*
flattened to (T, D) rows, so images with different numbers of active tokens cost exactly their
tokens. Attention runs as one batched call when every image has the same number of active tokens
(always at batch 1) and otherwise as one call per image (`attention.image_attention`), which is exact
and wastes nothing; padding to a common count with a key mask would pay for the padded queries and
leave the fused SDPA kernel. The frozen keys/values are stored
token-major (B*N, 2D), so "fresh keys for the active tokens, cached keys for the rest" is a single
`index_copy`. Without autograd the cache and (if asked) the states are written in place.

Public pieces:
    TokenSubset      which tokens run: flat row indices into (B*N, D), grouped by image, with the
                     per-image counts as Python ints (shapes known without a device sync).
    DepthSubsets     per-step subsets for a fixed depth per token (token runs steps 0..d-1), made
                     with one device sync: active(s), exited(s), frozen(s).
    KVCache          frozen tokens' keys/values for one weight set, refreshed only when tokens
                     freeze or the weight set changes; counts projections and reuses.
    TokenRows        the layout of the (T, D) rows `Block.forward(rows, layout=TokenRows(...))` runs on:
                     attention among the active tokens or over a `KVCache` (`attention.rows_attention`).
    run_subset       one block application for a subset -> new x (`subset_work`: what it computes).
    run_masked       the same with static shapes (a (B, N) mask; every token computed, the active ones kept):
                     no host read, at the dense block's cost (MoR-ViT's token choice in training).

The block itself is the model's own `layers.Block` (one block path); this module only decides which
rows it runs on and where their keys/values come from. Everything is differentiable (out-of-place
index ops), so MoR can train through it; stochastic depth is drawn per image, as in `Block.forward`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from fractions import Fraction

import torch
from torch import Tensor, nn

from .flops import BlockWork
from .numerics import tracing
from .windows import Global, Windows


class TokenSubset:
    """Tokens of a (B, N, D) batch.

    index: (T,) int64 rows `b * N + j` of the flattened batch, image 0's rows first, then image 1's...
    counts: rows per image (Python ints, so no device sync is needed to know the shapes).
    num_tokens: N.
    in_order: True when `index` is known to be `arange(B * N)` (made by `everything`): per-row
        tensors in the subset's order then already have the (B, N) layout, no scatter needed.

    `batch_size`, `total`, `is_full` and `mean_count` are computed once, here (plain attributes: the engine reads
    them at every step).
    """

    __slots__ = ('index', 'counts', 'num_tokens', 'in_order', 'batch_size', 'total', 'is_full', 'mean_count', '_images')

    def __init__(self, index: Tensor, counts: tuple[int, ...], num_tokens: int, in_order: bool = False) -> None:
        self.index, self.counts, self.num_tokens, self.in_order = index, tuple(counts), num_tokens, in_order
        self.batch_size, self.total = len(self.counts), sum(self.counts)
        self.is_full = self.total == self.batch_size * num_tokens
        self.mean_count = self.total / self.batch_size
        self._images: Tensor | None = None

    @classmethod
    def from_mask(cls, mask: Tensor) -> TokenSubset:
        """(B, N) bool -> the subset of True tokens (one device sync)."""
        if mask.ndim != 2 or mask.dtype != torch.bool:
            raise ValueError(f'mask must be a (B, N) bool tensor, got {tuple(mask.shape)} {mask.dtype}')
        return cls(mask.reshape(-1).nonzero().squeeze(1), tuple(mask.sum(1).tolist()), mask.shape[1])

    @classmethod
    def from_positions(cls, positions: Tensor, num_tokens: int) -> TokenSubset:
        """(B, k) token positions per image (e.g. a top-k selection) -> subset with k tokens per image."""
        if positions.ndim != 2:
            raise ValueError(f'positions must be (B, k), got shape {tuple(positions.shape)}')
        B, k = positions.shape
        offsets = torch.arange(B, device=positions.device).unsqueeze(1) * num_tokens
        return cls((positions + offsets).reshape(-1), (k,) * B, num_tokens)

    @classmethod
    def everything(cls, batch_size: int, num_tokens: int, device: torch.device | str | None = None) -> TokenSubset:
        """Every token of every image (`run_subset` then runs the plain dense block)."""
        return cls(
            torch.arange(batch_size * num_tokens, device=device), (num_tokens,) * batch_size, num_tokens, in_order=True
        )

    def image_of_rows(self) -> Tensor:
        """(T,) image index of every row (computed once; while compiling at every call: the subset outlives the
        checkpointed block that asks, and dynamo refuses a write to it from inside `checkpoint`, a graph break)."""
        if self._images is not None:
            return self._images
        images = torch.div(self.index, self.num_tokens, rounding_mode='floor')
        if not tracing():
            self._images = images
        return images

    def mask(self) -> Tensor:
        """(B, N) bool, True for the tokens of the subset."""
        flat = torch.zeros(self.batch_size * self.num_tokens, dtype=torch.bool, device=self.index.device)
        return flat.index_fill(0, self.index, True).view(self.batch_size, self.num_tokens)

    def gather(self, x: Tensor) -> Tensor:
        """(B, N, ...) -> (T, ...) rows of the subset."""
        return x.reshape(-1, *x.shape[2:]).index_select(0, self.index)

    def scatter(self, x: Tensor, rows: Tensor) -> Tensor:
        """x (B, N, ...) with the subset's rows replaced by `rows` (T, ...); out of place."""
        return x.reshape(-1, *x.shape[2:]).index_copy(0, self.index, rows).view(x.shape)


class DepthSubsets:
    """Per-step token subsets for a fixed depth per token: a token of depth d runs steps 0..d-1.

    Tokens are sorted by depth once (deepest first, per image), so the tokens still active at
    step s are a prefix of each image's order and the tokens that exited a prefix-difference: every
    subset is a slice. The per-step counts come to the host in one sync.

    An image with no active token at step s does not attend at s, so none of its tokens is listed
    as frozen there either (no keys/values are projected for nobody).
    """

    def __init__(self, depth: Tensor, num_steps: int, alive: Sequence[Sequence[int]] | None = None) -> None:
        if depth.ndim != 2:
            raise ValueError(f'depth must be (B, N), got shape {tuple(depth.shape)}')
        B, N = depth.shape
        self.batch_size, self.num_tokens, self.num_steps = B, N, num_steps
        order = torch.argsort(depth, dim=1, descending=True, stable=True)  # (B, N), deepest first
        self._rows = order + torch.arange(B, device=depth.device).unsqueeze(1) * N  # flat row indices
        if alive is None:  # read now; a caller that has read them already passes them (no second sync)
            steps = torch.arange(num_steps, device=depth.device).view(-1, 1, 1)
            alive = (depth.unsqueeze(0) > steps).sum(-1).tolist()
        # alive[s][b]: tokens of image b with depth > s, i.e. still active at step s.
        self.alive: list[list[int]] = [list(row) for row in alive[:num_steps]]

    def _slices(self, lo: Sequence[int], hi: Sequence[int]) -> TokenSubset:
        counts = tuple(map(operator.sub, hi, lo))
        if self.batch_size == 1:
            index = self._rows[0, lo[0] : hi[0]]
        else:
            index = torch.cat([self._rows[b, lo[b] : hi[b]] for b in range(self.batch_size)])
        return TokenSubset(index, counts, self.num_tokens)

    def active(self, step: int) -> TokenSubset:
        """Tokens that run `step` (depth > step)."""
        return self._slices([0] * self.batch_size, self.alive[step])

    def exited(self, step: int) -> TokenSubset:
        """Tokens whose last step was `step - 1` (depth == step), in images still attending at `step`."""
        if step == 0:
            return self._slices([0] * self.batch_size, [0] * self.batch_size)
        now, before = self.alive[step], self.alive[step - 1]
        return self._slices(now, [p if n else n for n, p in zip(now, before)])

    def frozen(self, step: int) -> TokenSubset:
        """All tokens that no longer run (depth <= step), in images still attending at `step`."""
        now = self.alive[step]
        return self._slices(now, [self.num_tokens if n else n for n in now])


class KVCache:
    """Keys/values of frozen tokens under one weight set, (B*N, 2D) token-major.

    A frozen token's state does not change, so its keys/values only need projecting when it
    freezes or when a different block (weight set) runs; while one shared block repeats they are
    reused (docs/methods/edge_recvit.md). Rows of active tokens hold stale values that `run_subset` never reads.

    Counters (whole batch, for tests and tools): `projected` tokens whose keys/values were
    computed, `reused` token-steps served from the cache without projection.
    """

    def __init__(self) -> None:
        self.kv: Tensor | None = None
        self.owner: nn.Module | None = None  # the model's `layers.Block` (not imported: it imports this module)
        self.projected = 0
        self.reused = 0

    def update(self, block: nn.Module, x: Tensor, subsets: DepthSubsets, step: int) -> TokenSubset:
        """Make the cache valid for `block` and the tokens frozen at `step` of `subsets`; return what was
        projected: the tokens that exited since the last step while `block` is the same module, all frozen
        tokens when the weight set changes (only that subset is made).
        """
        B, N, D = x.shape
        if self.kv is None or self.kv.shape != (B * N, 2 * D):
            self.kv, self.owner = x.new_zeros(B * N, 2 * D), None
        new = subsets.exited(step) if self.owner is block else subsets.frozen(step)
        if new.total:
            self.kv = write_rows(self.kv, new.index, block.project_kv(new.gather(x)), not torch.is_grad_enabled())
        self.owner = block
        alive = subsets.alive[step]  # frozen: every token of the images still attending but the active ones
        self.projected += new.total
        self.reused += N * (len(alive) - alive.count(0)) - sum(alive) - new.total
        return new


def write_rows(target: Tensor, index: Tensor, rows: Tensor, inplace: bool) -> Tensor:
    """`target` (M, ...) with `rows` at `index`: in place (no copy of `target`) or out of place (autograd)."""
    rows = rows.to(target.dtype)  # autocast: projections may be in lower precision than the states
    return target.index_copy_(0, index, rows) if inplace else target.index_copy(0, index, rows)


class TokenRows:
    """The layout of a block application on the (T, D) rows of the `active` tokens (`Block.forward(rows,
    layout=TokenRows(...))`; its attention: `attention.rows_attention`). Plain data.

    kv_cache: keys/values of every other token, already `update`d for this block: attention is then over all N
        tokens of each image (docs/methods/edge_recvit.md). None: attention among the active tokens only
        (docs/methods/mor_vit.md, MoR).
    layout: the application's own layout: `windows.Windows`, `windows.Global` (relative position biases at the
        active tokens' grid positions) or None.
    """

    __slots__ = ('active', 'kv_cache', 'layout')

    def __init__(self, active: TokenSubset, kv_cache: KVCache | None = None, layout: Windows | Global | None = None):
        self.active, self.kv_cache, self.layout = active, kv_cache, layout


def drop_rows(delta: Tensor, rate: float, training: bool, rows: TokenRows) -> Tensor:
    """Stochastic depth per image (timm's `drop_path`) on the (T, D) rows of a token subset."""
    if rate == 0.0 or not training:
        return delta
    keep = 1.0 - rate
    scale = delta.new_empty(rows.active.batch_size).bernoulli_(keep).div_(keep)
    return delta * scale[rows.active.image_of_rows()].unsqueeze(-1)


def subset_work(
    block: nn.Module, active: TokenSubset, cached_keys: bool, layout: Windows | Global | None = None
) -> BlockWork:
    """What `run_subset` computes, per image (means over the batch); `new_kv` is the caller's."""
    N = active.num_tokens
    if isinstance(layout, Windows):  # attention as the dense windowed block's (`attention.rows_in_windows`)
        return block.work(
            active.mean_count,
            layout.size**2 + layout.num_prefix,
            attn_pairs=layout.pairs(),
            rel_pos=layout.rel_pos_work(),
        )
    keys = [N if cached_keys and n else n for n in active.counts]
    pairs = sum(n * k for n, k in zip(active.counts, keys)) / active.batch_size
    # the active queries; a full subset runs the dense block (`run_subset`): its grid's patch queries
    rel_pos = (0.0, 0.0) if layout is None else layout.rel_pos_work(None if active.is_full else active.mean_count)
    return block.work(active.mean_count, sum(keys) / active.batch_size, attn_pairs=pairs, rel_pos=rel_pos)


UPDATES = ('interpolate', 'additive')


def run_subset(
    block: nn.Module,
    x: Tensor,
    active: TokenSubset,
    *,
    kv_cache: KVCache | None = None,
    residual_gate: Tensor | None = None,
    update: str = 'interpolate',
    drop_path_rate: float = 0.0,
    inplace: bool = False,
    layout: Windows | Global | None = None,
) -> Tensor:
    """One application of `block` to the `active` tokens of x (B, N, D); the others are untouched (what it
    computes: `subset_work`).

    Args:
        block: the block (its `training` flag decides stochastic depth, as in `Block.forward`).
        x: token states (B, N, D).
        active: the tokens whose queries, norms and MLP run.
        kv_cache: see `TokenRows` (None: attention among the active tokens).
        residual_gate: (T,) per-active-token gate of the residual update in `active`'s row order (MoR-ViT's
            router weights). None means the block's output.
        update: how the gate applies: 'interpolate' `h <- h + g * (Block(h) - h)` (g = 1: the
            block's output) or 'additive' `h <- h + g * Block(h)` (MoR's code).
        drop_path_rate: stochastic depth of this application (per image).
        inplace: write the active rows into `x` itself instead of a copy (saves a copy of all
            B*N rows per step; only without autograd). The caller must clone states it keeps.
            Use the returned tensor: when every token is active it is a new one.
        layout: the attention layout of this application (`windows.Windows`, `windows.Global`), or None.

    Without autograd (`torch.no_grad()`), the fresh keys/values of the active rows are also written
    into `kv_cache` in place: those rows are not valid cache entries (their tokens are active), and
    `KVCache.update` projects them again when they freeze.

    Returns:
        The new states (B, N, D).
    """
    if active.total == 0:
        return x
    B, N, D = x.shape
    if active.is_full:  # every token runs: the plain block, keys are all tokens either way
        out = block(x, drop_path_rate=drop_path_rate, layout=layout)
        if residual_gate is None:
            return out
        if active.in_order:  # the gate rows are already image-major, token-minor
            g = residual_gate.view(B, N, 1)
        else:
            g = x.new_zeros(B * N).index_copy(0, active.index, residual_gate).view(B, N, 1)
        if update == 'additive' or torch.is_grad_enabled():
            return gated_update(x, out, g, update)
        return out.sub_(x).mul_(g).add_(x)  # `gated_update`'s ops in `out`'s memory (a fresh tensor)

    if kv_cache is not None and kv_cache.owner is not block:
        raise RuntimeError(
            'kv_cache was last updated for another block: call kv_cache.update(block, ...) before run_subset'
        )
    rows = x.reshape(B * N, D)
    h = rows.index_select(0, active.index)  # (T, D)
    out = block(h, drop_path_rate=drop_path_rate, layout=TokenRows(active, kv_cache, layout))
    if residual_gate is not None:
        out = gated_update(h, out, residual_gate.unsqueeze(-1), update)
    if inplace and torch.is_grad_enabled() and (x.requires_grad or out.requires_grad):
        raise RuntimeError('run_subset(inplace=True) is only for inference (no autograd graph)')
    return write_rows(rows, active.index, out, inplace).view(B, N, D)


def gated_update(h: Tensor, out: Tensor, g: Tensor, update: str) -> Tensor:
    """The gated residual update of the states `h` by the block's `out` (`UPDATES`): 'additive' `h + g out`, else
    `h + g (out - h)`. Not torch.lerp: its vectorised kernel rounds differently from its scalar tail, which made
    results depend on the batch layout (1-process vs 2-process training drifted apart)."""
    return h + g * out if update == 'additive' else h + g * (out - h)


def run_masked(
    block: nn.Module,
    x: Tensor,
    active: Tensor | None,
    *,
    residual_gate: Tensor | None = None,
    update: str = 'interpolate',
    drop_path_rate: float = 0.0,
    layout: Windows | Global | None = None,
) -> Tensor:
    """`run_subset`'s function with static shapes and no host read: `block` on every token of x (B, N, D), the keys
    of every attention limited to the `active` (B, N) bool tokens of their image (None: every token), the update
    kept for the active tokens only (`torch.where`: the others keep their state, and their rows pass no gradient
    into the block or the gate). The same outputs and gradients as `run_subset` on `TokenSubset.from_mask(active)`,
    at the dense block's cost (`subset_work` of every token). residual_gate: (B, N) per-token gates (see
    `run_subset`)."""
    kw = {}
    if active is not None:  # an image with no active token attends to every key: its rows are not kept
        kw['attn_mask'] = (active | ~active.any(1, keepdim=True))[:, None, None, :]  # (B, 1, 1, N)
    out = block(x, drop_path_rate=drop_path_rate, layout=layout, **kw)
    if residual_gate is not None:
        out = gated_update(x, out, residual_gate.unsqueeze(-1), update)
    return out if active is None else torch.where(active.unsqueeze(-1), out, x)


def top_k(scores: Tensor, k: int) -> Tensor:
    """Indices (B, k) of the k highest scores per row, ties broken by position (the lower first). Eagerly a
    stable sort (`torch.topk` breaks ties differently on different devices); while exporting `topk` (ONNX's
    TopK breaks ties the same way; a stable sort has no ONNX op)."""
    if tracing():
        return scores.topk(k, dim=1).indices
    return scores.sort(dim=1, descending=True, stable=True).indices[:, :k]


def capacity_tokens(capacity: float, num_patches: int) -> int:
    """Patch tokens kept at capacity `capacity`: ceil(cap * Np), at least 1, with `cap` as the nearest fraction
    of denominator <= 10^6 (so 0.7 * 10 is 7, not 8) and integer arithmetic only (a symbolic Np exports)."""
    fraction = Fraction(capacity).limit_denominator(10**6)
    return max(1, -(-num_patches * fraction.numerator // fraction.denominator))
