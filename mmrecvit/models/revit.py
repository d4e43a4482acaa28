"""reViT: one shared block, depth-programmed expert FFNs, elastic depth (SPEC §2).

One pre-norm block (attention, both LayerNorms and an E-expert FFN bank) is applied L times.
At application step t the depth coordinate `s_t = t/(L-1)` goes through a tiny router
ψ (Linear 1->16, SiLU, Linear 16->E, output zero-initialised), `g_t = softmax(ψ(s_t)/τ)`, and
the FFN of that step is the convex combination of the experts *in weight space*:

    θ̄_t = Σ_e g_{t,e} θ_e        for each of W1, b1, W2, b2
    h   = x + attn(norm1(x));    x' = h + FFN_{θ̄_t}(norm2(h))

Only the merged FFN runs, so a step costs what a dense ViT block costs. The gates do not depend on
the input: they are computed once per depth coordinate per forward, never per token.

Parameter names follow timm (STYLE 2) with one leading expert axis on the FFN:
`block.norm1`, `block.attn.qkv`, `block.attn.proj`, `block.norm2`, `block.mlp.fc1.weight` (E, 4D, D),
`block.mlp.fc1.bias` (E, 4D), `block.mlp.fc2.*`, plus `router.fc1`/`router.fc2`. `fold_to_plainvit`
turns a model into a `PlainViT` with L blocks (`blocks.t.*` <- `block.*`, `blocks.t.mlp` <- θ̄_t).

Decisions (SPEC §2 leaves them open or marks them; each is a constructor argument where cheap):

* (decision, SPEC §2) usage balance `1 - H(mean_t g_t)/log E`; expert diversity = mean pairwise
  cosine similarity of the flattened expert W1; router z-loss `mean_t (logsumexp_e z_t)^2` on the
  raw logits z_t = ψ(s_t). Weights 1e-2 / 1e-3 / 1e-3 (`balance_loss_weight`, `z_loss_weight`,
  `diversity_loss_weight`; 0 removes a term). The means over t run over every (image, step)
  application executed in the forward, so under step dropout they see the coordinates really used.
  The losses are training objectives: they are filled in training mode only, and only when E > 1
  (the paper omits them for E=1), as `stats.aux_losses['loss_revit_balance' | 'loss_revit_z' |
  'loss_revit_diversity']`, already weighted.
* (decision) router: `fc1` keeps PyTorch's default Linear initialisation (U(-1, 1) for a single
  input) so its 16 hidden units are distinct functions of s in [0, 1]; with timm's std-0.02 init the
  hidden layer would be ~0 and the router could hardly learn. `fc2` is zero (uniform gates, SPEC).
* (decision) elastic depth in training: each image drops each whole step independently with
  `step_drop_rate` (0.3). An image keeps at least 2 steps (the smallest depth that has a coordinate
  grid, like the constructor's L >= 2): when fewer survive, the missing ones are drawn uniformly
  from its dropped steps. The K kept steps are renumbered k = 0..K-1 with coordinates
  `s_k = k/(K-1)`, i.e. the image runs exactly a K-step reViT (tested). Images with different
  kept sets are run as separate groups (one merged FFN per distinct coordinate), so dropped steps
  cost nothing.
* (decision) outputs by normalised depth d in (0, 1]: the state after the first max(1, floor(d*L))
  of the L applications, i.e. step index `max(1, floor(d*L)) - 1` (0.25/0.5/0.75/1.0 -> steps
  2/5/8/11 at L=12, 1/3/5/7 at L=8, the same as `PlainViT`'s default stage ends). Under step dropout
  the rule is applied to each image's own K kept steps (requested step i of L -> its kept step
  number max(1, floor((i+1)*K/L))), so every level keeps its relative depth and level 1.0 is
  always the image's final state.
* (decision) stochastic depth (`drop_path_rate`) is indexed by the original application step t,
  also under step dropout.
* (decision) no final LayerNorm: like `PlainViT` this is a dense-prediction backbone whose maps feed
  a neck. S/16 with E=4 then has 5.69M parameters (6.08M with a LayerNorm + 1000-class head: the
  paper's 6.1M).
* (decision) eval weight cache: in eval mode with autograd off (`torch.no_grad`/`inference_mode`,
  as mmdet/mmseg testing and benchmarks run) the gates and the L merged FFNs are computed once and
  reused while the key (every router/expert parameter's `_version` counter and storage address,
  dtype, device, L) is unchanged, so optimizer steps, `load_state_dict`, `.to()` and depth changes
  invalidate it by themselves (writes through `p.data` do not bump the counters: call
  `invalidate_cache()` after those). Nothing is cached in training mode or with autograd on (the
  merged weights must carry a graph then); `train()` drops the cache.
* (decision, SPEC §6) from a timm/DeiT checkpoint: shared attention and norms <- mean over all
  blocks (`timm_init='average'`) or the middle block (`'middle'`); expert e <- mean FFN of the
  e-th of E contiguous, (near-)equal groups of blocks; router fresh (zero output).
"""
from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from .checkpoint import average_blocks, fresh_parameters, load_state_dict_strict, logger, split_timm_blocks
from .checks import check_choice, check_float, check_int, check_sequence
from .compute import in_force, largest_within
from .flops import OpWork, conv_work, total_flops
from .numerics import sanitize
from .stats import ForwardStats
from .vit import ARCH_SETTINGS, PlainViT, ViTBackbone, check_out_indices, full_precision, resolve_arch

DEFAULT_OUT_DEPTHS = (0.25, 0.5, 0.75, 1.0)
PROGRAMMED_GATE = 0.97  # `timm_gates='programmed'`: each step's gate on the expert of its own depth


def depth_coordinates(num_steps: int) -> list[float]:
    """The normalised depth grid `s_t = t/(L-1)`, t = 0..L-1 (SPEC §2), as Python floats.

    Python division is correctly rounded, so k/(K-1) of a renumbered step and t/(L-1) of the same
    rational coordinate are the same float: equal coordinates share one gate row and one merge.
    """
    return [t / (num_steps - 1) for t in range(num_steps)]


def out_depth_to_step(out_depth: float, num_steps: int) -> int:
    """Step index of the output at normalised depth d for L steps: `max(1, floor(d*L)) - 1`."""
    return max(1, math.floor(out_depth * num_steps + 1e-9)) - 1


class MergedFfn(NamedTuple):
    """Merged FFN weights; leading dims are those of the gates that made them (none, or (L,))."""

    fc1_weight: Tensor  # (..., H, D)
    fc1_bias: Tensor    # (..., H)
    fc2_weight: Tensor  # (..., D, H)
    fc2_bias: Tensor    # (..., D)

    def at(self, i: int) -> MergedFfn:
        return MergedFfn(*(w[i] for w in self))


class ExpertLinear(nn.Module):
    """E stacked linear layers, `weight` (E, out, in) and `bias` (E, out); only their mix is run."""

    def __init__(self, num_experts: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_experts, out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(num_experts, out_features))
        trunc_normal_(self.weight, std=0.02)  # each expert as a timm Linear

    def merge(self, gates: Tensor) -> tuple[Tensor, Tensor]:
        """gates (..., E) -> weight (..., out, in), bias (..., out): `Σ_e g_e θ_e`."""
        # (..., E) @ (E, out*in) -> (..., out*in) -> (..., out, in)
        weight = (gates @ self.weight.flatten(1)).unflatten(-1, self.weight.shape[1:])
        return weight, gates @ self.bias


class ExpertMlp(nn.Module):
    """The expert FFN bank: GELU MLPs with weights `fc1`/`fc2` stacked over E experts."""

    def __init__(self, dim: int, hidden_dim: int, num_experts: int) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.fc1 = ExpertLinear(num_experts, dim, hidden_dim)
        self.act = nn.GELU()
        self.fc2 = ExpertLinear(num_experts, hidden_dim, dim)

    def merge(self, gates: Tensor) -> MergedFfn:
        """gates (..., E) -> the convex combination of the experts' W1, b1, W2, b2 (SPEC §2)."""
        return MergedFfn(*self.fc1.merge(gates), *self.fc2.merge(gates))

    def merge_macs(self) -> int:
        """Multiply-accumulates of one merge (one gate row): E per FFN parameter."""
        return self.num_experts * sum(p[0].numel() for p in self.parameters())

    def forward(self, x: Tensor, ffn: MergedFfn) -> Tensor:
        """Run one merged FFN, (B, N, D) -> (B, N, D)."""
        return F.linear(self.act(F.linear(x, ffn.fc1_weight, ffn.fc1_bias)), ffn.fc2_weight, ffn.fc2_bias)


class DepthRouter(nn.Module):
    """ψ: depth coordinate s -> E expert logits (Linear 1->hidden, SiLU, Linear hidden->E)."""

    def __init__(self, num_experts: int, hidden_dim: int = 16) -> None:
        super().__init__()
        self.fc1 = nn.Linear(1, hidden_dim)  # PyTorch default init (decision, module docstring)
        self.act = nn.SiLU()
        self.fc2 = nn.Linear(hidden_dim, num_experts)
        nn.init.zeros_(self.fc2.weight)  # uniform gates at initialisation (SPEC §2)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, coords: Tensor) -> Tensor:
        """(U,) coordinates -> (U, E) logits."""
        return self.fc2(self.act(self.fc1(coords.unsqueeze(-1))))


@dataclass
class _Schedule:
    """Which images run which step with which coordinate, and where outputs are read.

    coords: distinct depth coordinates of this forward; row u of the gate table. The nominal grid
        of L comes first (u = t), so `gates[:L]` is the inference depth program.
    runs[t]: (u, images) groups applying step t with coordinate u; images None = the whole batch.
    reads[t]: (output j, images) read right after step t; images None = the whole batch.
    counts[u]: (image, step) applications that used coordinate u.
    kept: (B, L) bool mask of the steps each image kept (training with step dropout), else None.
    """

    coords: list[float]
    runs: list[list[tuple[int, list[int] | None]]]
    reads: list[list[tuple[int, list[int] | None]]]
    counts: list[int]
    kept: Tensor | None = None


def _take(x: Tensor, index: Tensor | None) -> Tensor:
    return x if index is None else x.index_select(0, index)


def _put(dst: Tensor, index: Tensor | None, src: Tensor) -> Tensor:
    """Rows `index` of `dst` replaced by `src`, out of place (autograd-safe); None: all rows."""
    return src if index is None else dst.index_copy(0, index, src)


class ReViT(ViTBackbone):
    """reViT: one shared block applied L times with depth-programmed expert FFNs (SPEC §2).

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' (aliases 'ti', 's', 'b', 'l'); `embed_dim`, `depth` and
            `num_heads` override the table.
        depth: L, the number of block applications (>= 2; default 12). Any L works at inference with
            the same weights (the router is evaluated on the new grid); also settable later
            (`model.depth = 16`) or from a config (`--cfg-options model.backbone.depth=8`).
        num_experts: E, expert FFNs in the bank (>= 1; E=1 is plain weight tying).
        router_hidden_dim: hidden width of the router ψ (16).
        router_temperature: τ of the gate softmax (1.0).
        out_depths: normalised depths in (0, 1] of the returned maps (default 0.25/0.5/0.75/1.0);
            `out_indices` gives their step indices at the current L (see the module docstring).
        step_drop_rate: elastic-depth training, per-image probability of dropping a whole step
            (0.3; 0 disables it). Ignored in eval mode.
        balance_loss_weight, z_loss_weight, diversity_loss_weight: weights of the auxiliary losses
            (1e-2, 1e-3, 1e-3; 0 removes a term). Only used when E > 1, in training mode.
        timm_gates: the router's start when a timm/DeiT checkpoint is loaded (SPEC §6, resolving it
            against §2): 'programmed' (default) fits the router so that step t's gate puts 0.97 on
            the expert of its own depth group, floor(t E / L), as the original stack would
            (`programmed_router`); 'uniform' keeps §2's zero output layer (every step the mean FFN).
            From scratch (no checkpoint) the router is always §2's zero init.
        timm_init: how the shared attention and norms are taken from an L-block timm/DeiT checkpoint:
            'average' over all blocks (default) or the 'middle' block (SPEC §6).
        compute: the test-time knob through elastic depth: the model runs as a K-step reViT
            (coordinates re-spread over K, `out_depths` read at K, as `model.depth = K`), K in
            2..L the largest whose FLOPs are <= compute x those at the current L (rounded down, at
            least 2). Candidates are compared by their block applications and patch embedding; the
            router and expert merge, computed once per depth and cached in eval, are left out of
            the choice (they are in `stats.flops` of a forward that computes them).
        Other arguments (mlp_ratio, qkv_bias, init_values, patch_size, img_size, in_channels,
        with_cls_token, drop_path_rate, with_cp, pretrained, init_cfg): see `ViTBackbone`.
    """

    def __init__(self, arch: str = 'small', embed_dim: int | None = None, depth: int | None = None,
                 num_heads: int | None = None, num_experts: int = 4, router_hidden_dim: int = 16,
                 router_temperature: float = 1.0, out_depths: Sequence[float] = DEFAULT_OUT_DEPTHS,
                 step_drop_rate: float = 0.3, balance_loss_weight: float = 1e-2, z_loss_weight: float = 1e-3,
                 diversity_loss_weight: float = 1e-3, timm_init: str = 'average', timm_gates: str = 'programmed',
                 **kwargs: Any) -> None:
        sizes = resolve_arch(arch, ARCH_SETTINGS, embed_dim=embed_dim, depth=depth, num_heads=num_heads)
        super().__init__(embed_dim=sizes['embed_dim'], num_heads=sizes['num_heads'], depth=sizes['depth'], **kwargs)
        self.num_experts = check_int('num_experts', num_experts, 1)
        check_int('router_hidden_dim', router_hidden_dim, 1)
        self.router_temperature = check_float('router_temperature', router_temperature, 0.0, math.inf,
                                              low_open=True)
        self.out_depths = tuple(check_float('out_depths entry', d, 0.0, 1.0, low_open=True)
                                for d in check_sequence('out_depths', out_depths))
        self.step_drop_rate = check_float('step_drop_rate', step_drop_rate, 0.0, 1.0, high_open=True)
        self.loss_weights = {name: check_float(f'{name}_loss_weight', w, 0.0, math.inf) for name, w in
                             (('balance', balance_loss_weight), ('z', z_loss_weight),
                              ('diversity', diversity_loss_weight))}
        self.timm_init = check_choice('timm_init', timm_init, ['average', 'middle'])
        self.timm_gates = check_choice('timm_gates', timm_gates, ['programmed', 'uniform'])

        # The one shared block: a `Block` whose MLP is the expert bank (attention and norms as timm).
        self.block = self.make_block(functools.partial(ExpertMlp, num_experts=self.num_experts))
        self.router = DepthRouter(self.num_experts, router_hidden_dim)
        self._ffn_cache: tuple[tuple, tuple[Tensor, Tensor, MergedFfn]] | None = None

    # ---- depth and outputs ------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """L, the number of block applications; setting it re-spreads the depth grid."""
        return self._depth

    @depth.setter
    def depth(self, value: int) -> None:
        self._depth = check_int('depth', value, 2)
        self.drop_path_rates = torch.linspace(0, self.drop_path_rate, self._depth, device='cpu').tolist()

    @property
    def num_blocks(self) -> int:
        return 1

    def compute_setting(self, fraction: float, grid: tuple[int, int]) -> dict[str, Any]:
        """`compute` -> the elastic depth K of one forward (class docstring)."""
        tokens, full = grid[0] * grid[1] + self.num_prefix_tokens, self.depth
        embed = conv_work('patch_embed', self.patch_embed.proj, grid).flops

        def flops_of(i: int) -> float:  # K = i + 2 steps (window layouts follow the depth)
            with in_force(self, {'depth': i + 2}):
                return embed + total_flops(self.dense_stats(tokens, i + 2).work)

        kept = 2 + largest_within(fraction, flops_of(full - 2), flops_of, full - 1)
        return {} if kept == full else {'depth': kept}

    @property
    def schedule(self) -> list[int]:
        """Every application step runs the one block."""
        return [0] * self.depth

    @property
    def out_indices(self) -> tuple[int, ...]:
        """Step indices of `out_depths` at the current depth L."""
        return tuple(out_depth_to_step(d, self.depth) for d in self.out_depths)

    # ---- router and merged FFNs -------------------------------------------------------------
    def route(self, coords: Sequence[float]) -> tuple[Tensor, Tensor]:
        """Depth coordinates -> gates `softmax(ψ(s)/τ)` (U, E) and raw logits ψ(s) (U, E)."""
        logits = self.router_logits(coords)
        return self.gates_of(logits), logits

    def router_logits(self, coords: Sequence[float]) -> Tensor:
        """Depth coordinates -> raw logits ψ(s) (U, E)."""
        ref = self.router.fc1.weight
        return full_precision(self.router, torch.tensor(coords, dtype=ref.dtype, device=ref.device))

    def gates_of(self, logits: Tensor) -> Tensor:
        """Logits (U, E) -> gates `softmax(ψ(s)/τ)`; NaN/inf logits count as 0 (the identity on finite
        ones): `forward_states` reports them (`guard_finite`), also when they come from the eval cache."""
        return (sanitize(logits) / self.router_temperature).softmax(-1)

    def merged_ffns(self, depth: int | None = None) -> tuple[Tensor, Tensor, MergedFfn]:
        """Gates (L, E), logits (L, E) and the L merged FFNs on the grid `s_t = t/(L-1)`."""
        num_steps = self.depth if depth is None else check_int('depth', depth, 2)
        gates, logits = self.route(depth_coordinates(num_steps))
        return gates, logits, self.block.mlp.merge(gates)

    def _cache_key(self) -> tuple:
        params = (*self.router.parameters(), *self.block.mlp.parameters())
        return (self.depth, self.router_temperature, params[0].device,
                tuple((p.data_ptr(), p._version, p.dtype) for p in params))

    def _inference_ffns(self) -> tuple[Tensor, Tensor, MergedFfn, bool]:
        """Eval mode: the merged FFNs of the current L, cached while autograd is off (module docstring);
        the last value says whether they were computed now (False: from the cache)."""
        if torch.is_grad_enabled():
            return (*self.merged_ffns(), True)
        key = self._cache_key()
        fresh = self._ffn_cache is None or self._ffn_cache[0] != key
        if fresh:
            device_type = self.router.fc1.weight.device.type
            # Plain tensors (not inference tensors) in the parameters' dtype, whatever the caller's mode.
            with torch.inference_mode(False), torch.no_grad(), torch.autocast(device_type, enabled=False):
                self._ffn_cache = (key, self.merged_ffns())
        return (*self._ffn_cache[1], fresh)

    def invalidate_cache(self) -> None:
        """Drop the eval cache of merged FFNs.

        Needed only after writing router/expert parameters through `.data` (`p.data.copy_(...)`):
        such writes bypass the version counters the cache key reads. Optimizer steps,
        `load_state_dict`, in-place ops under `torch.no_grad()`, `.to()` and depth changes are seen.
        """
        self._ffn_cache = None

    def train(self, mode: bool = True) -> ReViT:
        if mode:
            self.invalidate_cache()  # never cache while training; free the memory
        return super().train(mode)

    # ---- elastic depth ----------------------------------------------------------------------
    def sample_kept_steps(self, batch: int, depth: int | None = None) -> Tensor:
        """(B, L) bool: per image, the steps that survive step dropout (at least 2, module docstring)."""
        num_steps = self.depth if depth is None else depth
        keep = torch.rand(batch, num_steps) >= self.step_drop_rate
        # Kept steps rank first, then the dropped ones in random order: top-2 tops up short rows.
        top2 = (torch.rand(batch, num_steps) + keep.float()).topk(2, dim=1).indices
        short = keep.sum(1) < 2
        keep[short] = keep[short].scatter(1, top2[short], True)
        return keep

    def _schedule(self, batch: int, indices: Sequence[int]) -> _Schedule:
        num_steps = self.depth
        coords = depth_coordinates(num_steps)
        if not (self.training and self.step_drop_rate > 0):
            last = max(indices)
            return _Schedule(coords=coords,
                             runs=[[(t, None)] if t <= last else [] for t in range(num_steps)],
                             reads=[[(j, None) for j, i in enumerate(indices) if i == t] for t in range(num_steps)],
                             counts=[batch if t <= last else 0 for t in range(num_steps)])
        kept = self.sample_kept_steps(batch, num_steps)
        row = {c: u for u, c in enumerate(coords)}
        counts = [0] * num_steps
        runs: list[dict[int, list[int]]] = [{} for _ in range(num_steps)]
        reads: list[dict[int, list[int]]] = [{} for _ in range(num_steps)]
        for b, mask in enumerate(kept.tolist()):
            steps = [t for t, k in enumerate(mask) if k]
            K = len(steps)
            # Requested step i of L -> this image's kept step number max(1, floor((i+1)K/L)).
            targets = [steps[max(1, (i + 1) * K // num_steps) - 1] for i in indices]
            for j, t in enumerate(targets):
                reads[t].setdefault(j, []).append(b)
            for k, t in enumerate(steps):
                if t > max(targets):
                    break
                u = row.setdefault(k / (K - 1), len(coords))  # s_k = k/(K-1): coordinates re-spread
                if u == len(coords):
                    coords.append(k / (K - 1))
                    counts.append(0)
                counts[u] += 1
                runs[t].setdefault(u, []).append(b)

        def whole(images: list[int]) -> list[int] | None:
            return None if len(images) == batch else images  # images are listed in batch order

        return _Schedule(coords=coords, counts=counts, kept=kept,
                         runs=[[(u, whole(imgs)) for u, imgs in r.items()] for r in runs],
                         reads=[[(j, whole(imgs)) for j, imgs in r.items()] for r in reads])

    # ---- forward ----------------------------------------------------------------------------
    def _merge_and_apply(self, x: Tensor, gate: Tensor, drop_path_rate: float, windows: Any) -> Tensor:
        return self.block(x, drop_path_rate, rows=windows, ffn=self.block.mlp.merge(gate))

    def _apply_step(self, x: Tensor, step: int, gate: Tensor, ffn: MergedFfn | None) -> Tensor:
        """One application of the shared block as step `step` (its drop-path rate).

        Training merges inside the (optionally checkpointed) call, so with `with_cp` the merged
        weights are recomputed in backward instead of stored; eval passes the cached merge.
        """
        rate, windows = self.drop_path_rates[step], self.window_for(step)
        if ffn is not None:
            return self.block(x, rate, rows=windows, ffn=ffn)
        if self.with_cp and self.training and torch.is_grad_enabled():
            return checkpoint(self._merge_and_apply, x, gate, rate, windows, use_reentrant=False)
        return self._merge_and_apply(x, gate, rate, windows)

    def forward_states(self, x: Tensor, indices: Sequence[int]) -> list[Tensor]:
        """Token states (B, N, D) after the requested application steps of the current L."""
        indices = check_out_indices(indices, self.depth, 'indices')
        plan = self._schedule(x.shape[0], indices)
        labels = [f'step {u} (s={c:.3g})' if u < self.depth else f'a kept step at s={c:.3g}'
                  for u, c in enumerate(plan.coords)]
        if self.training:
            # Once per distinct coordinate, never per token; gates from the checked logits.
            logits = self.guard_finite('router logits', labels, self.router_logits(plan.coords), self.router)
            gates, ffns = self.gates_of(logits), None
            merges = sum(len(runs) for runs in plan.runs)  # one merge per (step, coordinate) run
        else:
            gates, logits, ffns, fresh = self._inference_ffns()
            logits = self.guard_finite('router logits', labels, logits)
            merges = self.depth if fresh else 0

        def index(images: list[int] | None) -> Tensor | None:
            return None if images is None else torch.tensor(images, device=x.device)

        states: list[Tensor | None] = [None if plan.kept is None else x.new_zeros(x.shape) for _ in indices]
        for step, (runs, reads) in enumerate(zip(plan.runs, plan.reads)):
            for u, images in runs:
                idx = index(images)
                y = self._apply_step(_take(x, idx), step, gates[u], None if ffns is None else ffns.at(u))
                x = _put(x, idx, y)
            for j, images in reads:
                idx = index(images)
                states[j] = _put(states[j], idx, _take(x, idx))
        self.stats = self._statistics(plan, gates, logits, x.shape[0], x.shape[1])
        B, fc = x.shape[0], self.router.fc1
        if merges:  # work done once for the batch, counted per image (flops.py)
            routed = len(plan.coords) if self.training else self.depth
            self.stats.work += [OpWork('router', routed * fc.out_features * (1 + self.num_experts) / B),
                                OpWork('block.mlp (expert merge)', merges * self.block.mlp.merge_macs() / B)]
        return states

    # ---- statistics and auxiliary losses ----------------------------------------------------
    def _statistics(self, plan: _Schedule, gates: Tensor, logits: Tensor, batch: int, tokens: int) -> ForwardStats:
        ran = [sum(batch if imgs is None else len(imgs) for _, imgs in runs) / batch for runs in plan.runs]
        last = max(t for t, r in enumerate(ran) if r > 0)
        work = [self.step_work(t, tokens, r) for t, r in enumerate(ran[: last + 1])]
        weights = torch.tensor(plan.counts, dtype=gates.dtype, device=gates.device)
        weights = weights / weights.sum()  # share of the (image, step) applications per coordinate
        usage = (weights @ gates).detach()
        stats = ForwardStats(work=work, tables={'gates': gates[: self.depth].detach()},
                             scalars={f'revit_gate_e{e}': usage[e] for e in range(self.num_experts)})
        if plan.kept is not None:
            stats.tables['kept_steps'] = plan.kept
            stats.scalars['revit_kept_steps'] = plan.kept.sum(1).float().mean()
        if self.training and self.num_experts > 1:
            stats.aux_losses = self.auxiliary_losses(gates, logits, weights)
        return stats

    def auxiliary_losses(self, gates: Tensor, logits: Tensor, weights: Tensor) -> dict[str, Tensor]:
        """Weighted aux losses (SPEC §2) from gates/logits (U, E) and per-row weights (U,) summing to 1."""
        lw, E = self.loss_weights, self.num_experts
        out = {}
        if lw['balance']:
            usage = weights @ gates  # mean_t g_t
            out['loss_revit_balance'] = lw['balance'] * (1 - torch.special.entr(usage).sum() / math.log(E))
        if lw['z']:
            out['loss_revit_z'] = lw['z'] * (weights * logits.logsumexp(-1).square()).sum()
        if lw['diversity']:
            w1 = F.normalize(self.block.mlp.fc1.weight.flatten(1), dim=1)  # (E, H*D), unit rows
            sim = w1 @ w1.T
            out['loss_revit_diversity'] = lw['diversity'] * (sim.sum() - sim.diagonal().sum()) / (E * (E - 1))
        return out

    # ---- layer-wise learning-rate decay ------------------------------------------------------
    def layer_positions(self) -> dict[str, list[int]]:
        """The shared block (attention, norms, expert bank) runs at positions 1..L, so its layer
        depth is (L + 1) / 2 (`ViTBackbone.layer_depth`); the router ψ is fresh (lr scale 1)."""
        return {'block': list(range(1, self.depth + 1))}

    # ---- checkpoints and folding ------------------------------------------------------------
    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """timm/DeiT -> reViT (SPEC §6): shared attention/norms from all blocks' mean or the middle
        block (`timm_init`); expert e <- mean FFN of the e-th of E contiguous groups of blocks
        (sizes differ by at most one when E does not divide the depth); the router as `timm_gates`."""
        rest, blocks = split_timm_blocks(state_dict)
        n, E = len(blocks), self.num_experts
        if n < E:
            raise ValueError(f'cannot initialise num_experts={E} experts from a {n}-block checkpoint: '
                             f'num_experts must be at most {n}')
        shared = average_blocks(blocks) if self.timm_init == 'average' else blocks[n // 2]
        out = dict(rest)
        out.update({f'block.{k}': v for k, v in shared.items() if not k.startswith('mlp.')})
        experts = [average_blocks([{k: v for k, v in blocks[i].items() if k.startswith('mlp.')}
                                   for i in range(e * n // E, (e + 1) * n // E)]) for e in range(E)]
        for name in ('fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias'):
            out[f'block.mlp.{name}'] = torch.stack([ffn[f'mlp.{name}'] for ffn in experts])
        out = fresh_parameters(self, out, r'^router\.')
        if self.timm_gates == 'programmed' and E > 1:
            out.update(self.programmed_router())
            logger.info(f"router programmed (timm_gates='programmed'): step t -> expert floor(t*{E}/{self.depth})")
        return out

    def programmed_router(self) -> dict[str, Tensor]:
        """Router weights whose gates program depth like the stack the experts come from.

        Step t of the L-step grid gets `PROGRAMMED_GATE` = 0.97 on expert e = floor(t E / L) (the
        group of checkpoint blocks of its own depth), the rest spread over the other experts. The
        hidden layer becomes soft steps SiLU(k (s - c_j)) at centres c_j spread over [0, 1] (steep
        enough to switch between neighbouring grid points), and the output layer, linear in its
        weights, is solved by ridge least squares: no training, deterministic.
        """
        E, L = self.num_experts, self.depth
        hidden = self.router.fc1.out_features
        centres = torch.linspace(-0.5 / (L - 1), 1 + 0.5 / (L - 1), hidden, dtype=torch.float64)
        steep = 4.0 * (L - 1)
        fc1_weight, fc1_bias = torch.full((hidden, 1), steep, dtype=torch.float64), -steep * centres
        target = torch.full((L, E), (1 - PROGRAMMED_GATE) / (E - 1), dtype=torch.float64)
        target[torch.arange(L), torch.arange(L) * E // L] = PROGRAMMED_GATE
        coords = torch.tensor(depth_coordinates(L), dtype=torch.float64).unsqueeze(1)
        design = torch.cat([F.silu(coords @ fc1_weight.T + fc1_bias), torch.ones(L, 1, dtype=torch.float64)], 1)
        logits = target.log() - target.log().mean(1, keepdim=True)
        # (design^T design + r I) solution = design^T logits: the minimum-norm fit, kept small by r.
        gram = design.T @ design + 1e-6 * torch.eye(hidden + 1, dtype=torch.float64)
        solution = torch.linalg.solve(gram, design.T @ logits)  # (hidden + 1, E)
        dtype = self.router.fc1.weight.dtype
        return {'router.fc1.weight': fc1_weight.to(dtype), 'router.fc1.bias': fc1_bias.to(dtype),
                'router.fc2.weight': solution[:-1].T.contiguous().to(dtype),
                'router.fc2.bias': solution[-1].contiguous().to(dtype)}

    def plainvit_config(self, depth: int | None = None) -> dict[str, Any]:
        """Constructor arguments of this model's dense twin with `depth` blocks (`PlainViT`).

        Only arguments that differ from `ViTBackbone`'s defaults are listed besides the sizes.
        """
        num_steps = self.depth if depth is None else check_int('depth', depth, 2)
        grid = self.pretrain_grid
        img_size = grid[0] * self.patch_size if grid[0] == grid[1] else [g * self.patch_size for g in grid]
        cfg: dict[str, Any] = dict(embed_dim=self.embed_dim, num_heads=self.num_heads, depth=num_steps,
                                   out_indices=[out_depth_to_step(d, num_steps) for d in self.out_depths])
        extras = dict(mlp_ratio=self.mlp_ratio, qkv_bias=self.qkv_bias, init_values=self.init_values,
                      patch_size=self.patch_size, img_size=img_size,
                      in_channels=self.patch_embed.proj.in_channels, with_cls_token=self.with_cls_token)
        defaults = inspect.signature(ViTBackbone.__init__).parameters
        cfg.update({k: v for k, v in extras.items() if v != defaults[k].default})
        return cfg


@torch.no_grad()
def fold_to_plainvit(revit: ReViT, depth: int | None = None) -> PlainViT:
    """Fold to dense (SPEC §2): a `PlainViT` with L blocks computing what `revit` computes at depth L.

    Block t gets the shared attention, norms (and LayerScales) and the merged FFN θ̄_t of the grid
    `s_t = t/(L-1)`; patch/position/CLS embeddings are copied. The result is in eval mode, on the
    device and in the dtype of `revit`, with `out_indices` = `revit`'s output steps at depth L.
    """
    cfg = revit.plainvit_config(depth)
    num_steps = cfg['depth']
    _, _, ffn = revit.merged_ffns(num_steps)
    own = revit.state_dict()
    sd = {k: v for k, v in own.items() if not k.startswith(('block.', 'router.'))}
    shared = {k[len('block.'):]: v for k, v in own.items() if k.startswith('block.') and not k.startswith('block.mlp.')}
    for t in range(num_steps):
        sd.update({f'blocks.{t}.{k}': v for k, v in shared.items()})
        sd.update({f'blocks.{t}.mlp.{name.replace("_", ".")}': w for name, w in ffn.at(t)._asdict().items()})
    ref = revit.pos_embed
    dense = PlainViT(**cfg).to(device=ref.device, dtype=ref.dtype)
    load_state_dict_strict(dense, sd, f'reViT folded at depth {num_steps}')
    return dense.eval()
