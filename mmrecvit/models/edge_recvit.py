"""Edge-RecViT: token-adaptive depth over a head / shared / tail block stack (docs/methods/edge_recvit.md).

    image -> patch embedding -> EARR ranker: depth d_i per patch token (CLS: full depth)
          -> layer 0: head block, layers 1..L-2: one shared block, layer L-1: tail block;
             a token of depth d runs layers 0..d-1, then its state is frozen
          -> states after the requested layers (exited tokens contribute their frozen state)

Two executions of the same function (`execution`): 'masked', the authors' reference (every token runs every
step and the still-active gate keeps exited tokens frozen; training always runs it, the straight-through
gradient of the depth draw reaches the ranker through the gate), and 'adaptive' (default in eval), the
token-adaptive engine (`token_adaptive.py`): queries, norms and MLP only for the active tokens, exited ones
kept as keys/values projected once per weight set. The depths decided, the forward's statistics hold each step's
token counts, from which its FLOPs are counted (`work`). Decisions and measurements: docs/methods/edge_recvit.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from torch import Tensor, nn

from . import token_adaptive
from .arguments import resolve_sizes
from .backbone import ViTBackbone
from .checkpoint import fresh_parameters, pick_or_average_blocks, split_timm_blocks
from .checks import check_bool, check_choice, check_float, check_int
from .compute import largest_within
from .flops import BlockWork, Work, linear_work
from .numerics import RouterLinear, finite, full_precision
from .registry import register_backbone
from .schedule import Step, step_work
from .stats import ForwardStats
from .token_adaptive import DepthSubsets, KVCache, TokenSubset, subset_work

EXECUTIONS = ('adaptive', 'masked')
HEAD, SHARED, TAIL = 0, 1, 2  # indices into `blocks`


def still_active_gates(y: Tensor) -> Tensor:
    """(..., L) one-hot depth choice y (straight-through allowed) -> gates a (..., L) (docs/methods/edge_recvit.md):
    `a_s = 1 - cumsum(y)_s + y_s`, 1 for steps s <= d-1 (the token still runs), 0 afterwards."""
    return 1.0 - y.cumsum(-1) + y


class EarrRanker(nn.Module):
    """EARR, the edge-aware recursion ranker: Linear(D->2D) -> GELU -> Linear(2D->L), no biases: depth logits
    z (B, Np, L) per patch token. timm's init (truncated normal, std 0.02; a zero init would give depth 1)."""

    def __init__(self, dim: int, depth: int) -> None:
        super().__init__()
        self.fc1 = RouterLinear(dim, 2 * dim, bias=False)  # fp32 products (`numerics.py`, "Routers decide in fp32")
        self.act = nn.GELU()
        self.fc2 = RouterLinear(2 * dim, depth, bias=False)
        for fc in (self.fc1, self.fc2):
            trunc_normal_(fc.weight, std=0.02)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


@register_backbone('edgerecvit')
class EdgeRecViT(ViTBackbone):
    """Edge-RecViT (docs/methods/edge_recvit.md): head block, one shared block up to L-2 times, tail block.

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' (aliases 'ti', 's', 'b', 'l'); `embed_dim`, `depth` (L, the
            layers, >= 3) and `num_heads` override the table.
        out_indices: layers whose states are returned (default (2, 5, 8, 11) of 12); tokens that exited
            earlier contribute their frozen state.
        shared_init_block: timm/DeiT block that initialises the shared block (the authors' code: 6 of 12;
            docs/methods/edge_recvit.md); None: the checkpoint's middle block. The head takes block 0, the tail
            the last one, `norm` the checkpoint's final norm.
        stb_loss_weight, du_loss_weight: weights of the STB z-loss `mean_i (logsumexp_l z_il)^2` (1e-3) and
            the DU balance loss `L sum_l E_l A_l` (0.1); dense tasks use STB + DU only (decision).
        gumbel_tau: the temperature of the training-time depth draw (1.0), a tempered categorical softmax(z / tau)
            drawn by Gumbel-max (not the Gumbel-softmax relaxation softmax((z + g) / tau): docs/methods/edge_recvit.md);
            a float attribute (`mm.hooks.TemperatureScheduleHook` anneals it) held in a non-persistent fp32 buffer
            that setting it updates in place, so a compiled forward reads a tensor, not a constant that recompiles
            (issue 48.3; not in the state dict: the hook sets it from the iteration): tau -> 0 trains on the
            argmax depths eval runs.
        max_depth: inference knob: cap every depth at this many layers (CLS too). None: L.
        depth_shift: inference knob: add this to every patch token's depth (clipped to [1, max_depth]).
        (attribute) depth_pattern: None, or a callable (B, Np) ranker depths -> the depths to run before the shift
            and cap: a fixed pattern instead of the ranker's choice (the benchmark harness's, `benchmark.forcing`).
        final_norm: timm's final LayerNorm on the last layer's state (True, as the authors' model; part of the
            paper's parameter counts). frozen_kv: exited tokens stay keys/values with their frozen state (True,
            docs/methods/edge_recvit.md); False: attention among the active tokens only. tail_on_all: every
            token runs the tail on its frozen state (our option, off = the paper).
        execution: 'adaptive' (the engine, eval) or 'masked' (the reference). Training and torch.compile (one graph:
            the engine's shapes are data) always run 'masked'.
        compute: the test-time knob through a shifted depth assignment: every patch token's depth of an image
            shifted by the same k in -(L-1)..0 (clipped), k the largest whose FLOPs (the 'adaptive' plan's) are
            <= compute x the full-depth FLOPs; chosen per image, the ranker's order kept.
        Other arguments: see `ViTBackbone`. The knobs are plain attributes, checked at every forward.

    Parameters: `blocks.0` head, `blocks.1` shared, `blocks.2` tail, `ranker.fc1`, `ranker.fc2`, `norm`.
    Statistics: `aux_losses` `loss_stb`, `loss_du`; `scalars` `depth/mean`, `depth/d{l}` (depths run),
    `depth/argmax_mean`, `depth/argmax_d{l}` (the depths eval runs), `depth/conf`, `depth/train_is_test` (the
    share of tokens run at their eval depth); `token_maps` `depth` (B, h, w) int64 and `confidence` (with its
    graph: CCE's signal).
    """

    def __init__(
        self,
        arch: str = 'small',
        *,
        depth: int | None = None,
        shared_init_block: int | None = None,
        stb_loss_weight: float = 1e-3,
        du_loss_weight: float = 0.1,
        gumbel_tau: float = 1.0,
        max_depth: int | None = None,
        depth_shift: int = 0,
        execution: str = 'adaptive',
        final_norm: bool = True,
        frozen_kv: bool = True,
        tail_on_all: bool = False,
        **kwargs: Any,
    ) -> None:
        sizes = resolve_sizes(arch, depth, kwargs)
        sizes['depth'] = check_int('depth (head + shared steps + tail, so at least 3)', sizes['depth'], 3)
        super().__init__(**sizes, final_norm=final_norm, **kwargs)
        if shared_init_block is not None:
            check_int('shared_init_block', shared_init_block, 0)
        self.shared_init_block = shared_init_block
        self.frozen_kv = check_bool('frozen_kv', frozen_kv)
        self.tail_on_all = check_bool('tail_on_all', tail_on_all)
        self.stb_loss_weight = check_float('stb_loss_weight', stb_loss_weight, 0.0, math.inf)
        self.du_loss_weight = check_float('du_loss_weight', du_loss_weight, 0.0, math.inf)
        self.register_buffer('_gumbel_tau', torch.ones((), dtype=torch.float32), persistent=False)
        self.gumbel_tau = gumbel_tau
        self.max_depth, self.depth_shift, self.execution = max_depth, depth_shift, execution
        self.depth_pattern: Callable[[Tensor], Tensor] | None = None
        self.check_knobs()
        self.blocks = nn.ModuleList(self.make_block() for _ in (HEAD, SHARED, TAIL))
        self.layer_blocks = (HEAD,) + (SHARED,) * (self.depth - 2) + (TAIL,)  # the block each layer runs
        self.ranker = EarrRanker(self.embed_dim, self.depth)

    @property
    def gumbel_tau(self) -> float:
        """The depth draw's temperature: read from its Python mirror (no device read), written into the buffer."""
        return self._gumbel_tau_value

    @gumbel_tau.setter
    def gumbel_tau(self, value: float) -> None:
        self._gumbel_tau_value = check_float('gumbel_tau', value, 0.0, math.inf, low_open=True)
        with torch.no_grad():
            self._gumbel_tau.fill_(self._gumbel_tau_value)

    def _apply(self, fn: Any, recurse: bool = True) -> EdgeRecViT:
        """Conversions move the temperature, rewritten from its mirror: fp32 whatever the cast (a `.half()` model draws
        as an fp32 one), set after `to_empty`."""
        super()._apply(fn, recurse)
        device = self._buffers['_gumbel_tau'].device
        self._buffers['_gumbel_tau'] = torch.full((), self._gumbel_tau_value, dtype=torch.float32, device=device)
        return self

    def check_knobs(self) -> None:
        """Validate the inference knobs (at construction and at every forward: plain attributes)."""
        L = self.depth
        if self.max_depth is not None:
            check_int('max_depth', self.max_depth, 1, L)
        check_int('depth_shift', self.depth_shift, 1 - L, L - 1)
        check_choice('execution', self.execution, EXECUTIONS)

    @property
    def cls_depth(self) -> int:
        """Depth of the prefix (CLS) tokens: the deepest allowed."""
        return self.depth if self.max_depth is None else self.max_depth

    def assign_depths(self, chosen: Tensor) -> Tensor:
        """Ranker depths (B, Np) in 1..L -> executed depths: `depth_pattern`'s instead when set, then the shift/cap
        knobs. The one place a depth assignment is made."""
        if self.depth_pattern is not None:
            chosen = self.depth_pattern(chosen)
        return (chosen + self.depth_shift).clamp(1, self.cls_depth)

    # ---- settings and the FLOP model ------------------------------------------------------------------
    static_schedule = True  # head, shared x (L - 2), tail at every setting; the depths decide the tokens

    @property
    def in_place_reads(self) -> bool:
        """The engine writes later layers into the rows of earlier ones in inference."""
        return self.execution == 'adaptive' and not self.training

    def setting_within(self, fraction: float, grid: tuple[int, int]) -> float:
        """The knob acts per image on the ranker's depths (`depths_within`): its setting is the fraction itself."""
        return fraction

    def counts(self, alive: Sequence[Sequence[int]]) -> tuple:
        """The setting the engine ran: alive[s][b], the tokens of image b still running step s, with the knobs that
        change what it computes for them (`frozen_kv`, `tail_on_all`)."""
        return tuple(map(tuple, alive)), self.frozen_kv, self.tail_on_all

    def work(self, steps: tuple[Step, ...], setting: tuple | None, grid: tuple[int, int]) -> list[Work]:
        """The ranker on the patch tokens, then each step: over every token (`setting` None: training, 'masked', full
        depth), or the engine's active tokens (`counts`) with its keys/values cache."""
        tokens, P = grid[0] * grid[1] + self.num_prefix_tokens, self.num_prefix_tokens
        head = [
            linear_work(f'ranker.{name}', tokens - P, fc.in_features, fc.out_features)
            for name, fc in (('fc1', self.ranker.fc1), ('fc2', self.ranker.fc2))
        ]
        if setting is None:
            return head + [step_work(step.block, tokens, step.layout) for step in steps]
        alive, frozen_kv, tail_on_all = setting
        per_image = [
            self._steps_of_image(steps, [a[b] for a in alive], tokens, frozen_kv, tail_on_all)
            for b in range(len(alive[0]))
        ]
        return head + [BlockWork.mean(step) for step in zip(*per_image)]

    def _steps_of_image(
        self, steps: tuple[Step, ...], alive: Sequence[int], tokens: int, frozen_kv: bool, tail_on_all: bool
    ) -> list[BlockWork]:
        """What the engine computes for one image whose step s runs `alive[s]` tokens (`run_subset`'s counts,
        `frozen_kv`'s cache included: what froze since the last step, or all frozen for a new weight set)."""
        work, owner, before = [], None, tokens
        for step, n in zip(steps, alive):
            block = step.block
            active = tokens if tail_on_all and step.index == self.depth - 1 else n
            cached, new = frozen_kv and 0 < active < tokens, 0
            if cached:
                new, owner = (before - active) if owner is block else (tokens - active), block
            work.append(
                dataclasses.replace(
                    subset_work(block, TokenSubset(None, (active,), tokens), cached_keys=cached, layout=step.layout),
                    new_kv=float(new),
                )
            )
            before = n
        return work

    def depths_within(self, depth: Tensor, fraction: float, grid: tuple[int, int]) -> tuple[Tensor, list[list[int]]]:
        """Patch-token depths (B, Np) -> the same shifted per image to fit `fraction` (class docstring), and the
        engine's counts of those depths, alive[s][b] with the prefix tokens (read to the host once, here)."""
        L, P = self.depth, self.num_prefix_tokens
        shifts = torch.arange(1 - L, 1, device=depth.device)  # the smallest setting first
        candidates = (depth.unsqueeze(0) + shifts.view(-1, 1, 1)).clamp(1, self.cls_depth)  # (S, B, Np)
        steps = torch.arange(L, device=depth.device)
        alive = ((candidates.unsqueeze(-1) > steps).sum(2) + P * (self.cls_depth > steps)).tolist()  # (S, B, L)
        full = self.plan_flops(None, grid)
        chosen = [
            largest_within(
                fraction,
                full,
                lambda i, b=b: self.plan_flops(self.counts([(n,) for n in alive[i][b]]), grid),
                len(shifts),
            )
            for b in range(depth.shape[0])
        ]
        counts = [[alive[i][b][s] for b, i in enumerate(chosen)] for s in range(L)]
        if min(chosen) == len(shifts) - 1:
            return depth, counts
        # one view per image, indexed by host ints: no upload of `chosen` (a second stream sync on a GPU)
        return torch.stack([candidates[i, b] for b, i in enumerate(chosen)]), counts

    # ---- forward ------------------------------------------------------------------------------
    def fx_untraceable(self) -> str:
        return 'the ranker picks the tokens each layer runs, per image (subsets of data-dependent size)'

    def iter_layers(
        self, x: Tensor, steps: tuple[Step, ...], fraction: float | None, stats: ForwardStats
    ) -> Iterator[tuple[int, Tensor]]:
        """The ranker's depth per patch token (and the knobs', the compute knob's `fraction` per image), then layer
        after layer, head, shared x (L - 2), tail, each token until its depth: the masked reference in training and
        with execution='masked' or under torch.compile, the token-adaptive engine otherwise (the module docstring)."""
        self.check_knobs()
        B, N, _ = x.shape
        P, L = self.num_prefix_tokens, self.depth
        where = 'the depth assignment (before step 0)'
        logits = finite('ranker logits', where, full_precision(self.ranker, x[:, P:]), self.ranker)
        probs = logits.softmax(-1)  # fp32, as the logits and the Gumbel noise (see full_precision)
        confidence, choice = probs.max(-1)  # confidence keeps its graph: CCE trains the ranker through it (mm/cce.py)
        eval_depth, counts = self.assign_depths(choice + 1), None  # (B, Np) int64 in 1..L: what eval runs
        if fraction is not None:  # the compute knob (eval only)
            eval_depth, counts = self.depths_within(eval_depth, fraction, stats.grid)
        depth = eval_depth
        if self.training:  # Gumbel-softmax straight-through: the forward uses the sampled one-hot
            gumbels = -torch.empty_like(logits).exponential_().log()
            y_soft = (logits / self._gumbel_tau + gumbels).softmax(-1)  # tau anneals the draw toward argmax (docs)
            depth = self.assign_depths(y_soft.detach().argmax(-1) + 1)
        depths = torch.cat([depth.new_full((B, P), self.cls_depth), depth], 1)  # (B, N)
        stats.aux_losses = self._aux_losses(logits, probs, eval_depth)
        stats.scalars.update(self._scalars(depth, 'depth/'))
        stats.scalars.update(self._scalars(eval_depth, 'depth/argmax_'))
        stats.scalars['depth/conf'] = confidence.detach().mean()
        stats.scalars['depth/train_is_test'] = (depth == eval_depth).float().mean()  # share run at its test depth
        stats.token_maps.update({'depth': depth, 'confidence': confidence})
        stats.setting = None
        run = self.block_runner()
        # torch.compile runs the masked reference: the engine's token counts are data (a graph and a recompile per new
        # image); the same outputs in one graph, without the engine's savings (docs/deploy.md).
        if self.training or self.execution == 'masked' or torch.compiler.is_compiling():
            y = F.one_hot(depths - 1, L).to(x.dtype)  # (B, N, L)
            if self.training:
                y = y + F.pad(y_soft - y_soft.detach(), (0, 0, P, 0))  # straight-through for patch tokens
            gates = still_active_gates(y)
            if self.tail_on_all:
                gates = torch.cat([gates[..., :-1], torch.ones_like(gates[..., -1:])], -1)
            gates = gates.to(x.dtype)  # 0/1 exactly: fp32 from the ranker, the model's dtype
            # The reference: every token through every layer, `h <- h + a_s (Block_s(h) - h)`; without `frozen_kv`
            # the keys are the tokens still active at s.
            for step in steps:
                a, kw = gates[..., step.index : step.index + 1], {}  # (B, N, 1)
                if not self.frozen_kv:
                    keys = a[..., 0].detach() > 0.5  # (B, N) the active tokens
                    keys = keys | ~keys.any(1, keepdim=True)  # an image with none attends to all (outputs unused)
                    kw['attn_mask'] = keys[:, None, None, :]  # (B, 1, 1, N): the same keys for every query
                block = step.block
                x = x + a * (run(block, x, drop_path_rate=step.drop_path_rate, layout=step.layout, **kw) - x)
                yield step.layer, x
            return
        # The engine: layer s runs only the tokens with depth > s; frozen keys/values are cached.
        subsets = DepthSubsets(depths, len(steps), counts)  # the layers this forward runs (the knob's counts: read)
        stats.setting = self.counts(subsets.alive)
        cache, inplace = KVCache(), not torch.is_grad_enabled()  # inference: update the rows in place
        for step in steps:
            block, active = step.block, subsets.active(step.index)
            if self.tail_on_all and step.index == L - 1:
                active = TokenSubset.everything(B, N, x.device)
            kw = dict(drop_path_rate=step.drop_path_rate, layout=step.layout)
            if active.is_full:  # no token has exited yet: the plain block, no key/value cache to fill
                x = run(token_adaptive.run_subset, block, x, active, **kw)
            elif not self.frozen_kv:  # attention among the active tokens (empty images do nothing)
                x = run(token_adaptive.run_subset, block, x, active, inplace=inplace, **kw)
            elif active.total:
                cache.update(block, x, subsets, step.index)
                x = run(token_adaptive.run_subset, block, x, active, kv_cache=cache, inplace=inplace, **kw)
            yield step.layer, x

    # ---- statistics ---------------------------------------------------------------------------
    def _aux_losses(self, logits: Tensor, probs: Tensor, token_depth: Tensor) -> dict[str, Tensor]:
        """STB z-loss and DU balance loss over the patch tokens of the batch, weighted; `token_depth`: the argmax
        depths (A_l, docs/methods/edge_recvit.md)."""
        L = self.depth
        stb = torch.logsumexp(logits, -1).square().mean()
        expected = probs.mean((0, 1))  # E_l
        actual = F.one_hot(token_depth - 1, L).to(probs.dtype).mean((0, 1))  # A_l
        du = L * (expected * actual).sum()
        return {'loss_stb': self.stb_loss_weight * stb, 'loss_du': self.du_loss_weight * du}

    def _scalars(self, token_depth: Tensor, prefix: str) -> dict[str, Tensor]:
        """Mean token depth and its histogram (fraction of patch tokens per depth), named `prefix`*."""
        hist = F.one_hot(token_depth.flatten() - 1, self.depth).float().mean(0)  # static shape: exportable
        scalars = {f'{prefix}mean': token_depth.float().mean()}
        scalars.update({f'{prefix}d{level}': f for level, f in enumerate(hist.unbind(), start=1)})
        return scalars

    # ---- weights ------------------------------------------------------------------------------
    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """head <- timm block 0, shared <- block `shared_init_block` (default the middle one), tail <- the last
        block (docs/methods/edge_recvit.md), `norm` <- the checkpoint's final norm; the ranker keeps its
        initialisation (logged)."""
        rest, blocks = split_timm_blocks(state_dict)
        if not blocks:
            raise ValueError('the timm checkpoint has no blocks.<i>.* keys to initialise Edge-RecViT from')
        n = len(blocks)
        shared = n // 2 if self.shared_init_block is None else self.shared_init_block
        if shared >= n:
            raise ValueError(
                f'shared_init_block={shared} is not a block of this {n}-block checkpoint; allowed: 0..{n - 1}'
            )
        rest.update(pick_or_average_blocks(blocks, [[0], [shared], [n - 1]], 'pick', prefix='blocks'))
        return fresh_parameters(self, rest, r'^(ranker|norm)\.')
