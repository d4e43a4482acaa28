"""reViT: one shared block, depth-programmed expert FFNs, elastic depth (docs/methods/revit.md).

One pre-norm block (attention, both LayerNorms and an E-expert FFN bank, `experts.py`) is applied L times.
At step t the depth coordinate `s_t = t/(L-1)` goes through a tiny router ψ, `g_t = softmax(ψ(s_t)/τ)`, and
the FFN of that step is the convex combination of the experts in weight space:

    θ̄_t = Σ_e g_{t,e} θ_e        for each of W1, b1, W2, b2
    h   = x + attn(norm1(x));    x' = h + FFN_{θ̄_t}(norm2(h))

Only the merged FFN runs, so a step costs what a dense ViT block costs; the gates do not depend on the input
and are computed once per depth coordinate per forward. `fold_to_plainvit` (`revit_fold.py`) turns a model
into a `PlainViT` with L blocks. Decisions and measurements: docs/methods/revit.md.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from . import fx
from .arguments import check_out_indices, deprecated, renamed, resolve_sizes, stage_ends
from .backbone import ViTBackbone
from .checkpoint import average_blocks, fresh_parameters, logger, split_timm_blocks
from .checks import check_choice, check_float, check_int, check_sequence
from .experts import (
    DepthRouter,
    ExpertBlock,
    ExpertMlp,
    MergedFfn,
    depth_grid,
    experts_from_blocks,
    out_depth_to_step,
    programmed_router,
)
from .flops import OpWork
from .numerics import finite, full_precision, sanitize
from .registry import register_backbone
from .schedule import Step, step_work
from .stats import ForwardStats
from .step_dropout import gather_reads, logit_labels, num_groups, per_image, sample_steps

PROGRAMMED_GATE = 0.97  # `router_init='programmed'`: each step's gate on the expert of its own depth
DEFAULT_OUT_DEPTHS = (0.25, 0.5, 0.75, 1.0)  # the default outputs, as normalised depths: the stage ends


@register_backbone('revit')
class ReViT(ViTBackbone):
    """reViT: one shared block applied L times with depth-programmed expert FFNs (docs/methods/revit.md).

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' (aliases 'ti', 's', 'b', 'l'); `embed_dim`, `depth` and
            `num_heads` override the table.
        depth: L, the layers (steps) (>= 2; default 12). Any L works at inference with the same weights (the
            router is evaluated on the new grid); also settable later (`model.depth = 16`), which moves
            `out_indices` to the same relative depths of the new L.
        num_experts: E, expert FFNs in the bank (>= 1; E=1 is plain weight tying).
        router_hidden_dim: hidden width of the router ψ (16). router_temperature: τ of the gate softmax (1.0).
        out_indices: layers whose maps are returned (default: the stage ends, (2, 5, 8, 11) at L=12, the
            normalised depths 0.25/0.5/0.75/1.0). The paper names outputs by normalised depth (issue 27):
            they are layers as in every backbone, kept as normalised depths so they keep their relative
            depth when L changes (the paper's reason). (`out_depths`, deprecated: normalised depths in (0, 1].)
        step_drop_rate: elastic-depth training, per-image probability of dropping a whole step (0.3; 0
            disables it). Ignored in eval mode. step_drop_groups: the images share their kept steps in G =
            gcd(B, step_drop_groups) groups of consecutive images (8; B or more: every image its own), so that each
            step's one block call runs its FFNs as G-batched products of B/G images rather than per image
            (docs/methods/revit.md).
        balance_loss_weight, z_loss_weight, diversity_loss_weight: weights of the auxiliary losses (1e-2, 1e-3,
            1e-3; 0 removes a term), training mode with E > 1 only.
        router_init: the router's start when a timm/DeiT checkpoint is loaded (docs/methods/revit.md):
            'programmed' (default) puts 0.97 on the expert of each step's own depth group, floor(t E / L);
            'uniform' keeps the zero output layer. shared_init: the shared attention and norms <- 'average' over all
            blocks or 'middle'.
        compute: the test-time knob through elastic depth: a K-step reViT (coordinates re-spread over K),
            K in 2..L the largest whose FLOPs are <= compute x those at the current L. The router and expert
            merge (cached in eval) are left out of the choice; they are in `stats.flops` when computed.
        Other arguments: see `ViTBackbone`. With E=1 the router's arguments have no effect and are refused.
    """

    mode_arguments = dict.fromkeys(
        (
            'router_hidden_dim',
            'router_temperature',
            'router_init',
            'balance_loss_weight',
            'z_loss_weight',
            'diversity_loss_weight',
        ),
        ('num_experts', (1,)),
    ) | {'step_drop_groups': ('step_drop_rate', (0.0, 0))}  # checks.py

    def __init__(
        self,
        arch: str = 'small',
        *,
        depth: int | None = None,
        num_experts: int = 4,
        router_hidden_dim: int = 16,
        router_temperature: float = 1.0,
        step_drop_rate: float = 0.3,
        step_drop_groups: int = 8,
        balance_loss_weight: float = 1e-2,
        z_loss_weight: float = 1e-3,
        diversity_loss_weight: float = 1e-3,
        shared_init: str = 'average',
        router_init: str = 'programmed',
        **kwargs: Any,
    ) -> None:
        sizes = resolve_sizes(arch, depth, kwargs)
        check_int('depth', sizes['depth'], 2)
        shared_init = renamed('ReViT', kwargs, 'timm_init', 'shared_init', shared_init, 'average')
        router_init = renamed('ReViT', kwargs, 'timm_gates', 'router_init', router_init, 'programmed')
        out_depths = deprecated(
            'ReViT', kwargs, 'out_depths', 'out_indices', ' (layers: the step of depth d is max(1, floor(d L)) - 1)'
        )
        if out_depths is not None:
            out_depths = tuple(
                check_float('out_depths entry', d, 0.0, 1.0, low_open=True)
                for d in check_sequence('out_depths', out_depths)
            )
            kwargs['out_indices'] = [out_depth_to_step(d, sizes['depth']) for d in out_depths]
        super().__init__(**sizes, **kwargs)
        # The outputs, kept as normalised depths d in (0, 1] so that they stay at the same relative depth when the
        # depth is set: the quarters by default (the stage ends at every L), (i + 1) / L for given layers i.
        if out_depths is None and kwargs.get('out_indices') is not None:
            out_depths = tuple((i + 1) / self.depth for i in check_out_indices(kwargs['out_indices'], self.depth))
        self._out_depths = DEFAULT_OUT_DEPTHS if out_depths is None else out_depths
        self.num_experts = check_int('num_experts', num_experts, 1)
        check_int('router_hidden_dim', router_hidden_dim, 1)
        self.router_temperature = check_float('router_temperature', router_temperature, 0.0, math.inf, low_open=True)
        self.step_drop_rate = check_float('step_drop_rate', step_drop_rate, 0.0, 1.0, high_open=True)
        self.step_drop_groups = check_int('step_drop_groups', step_drop_groups, 1)
        self.loss_weights = {
            name: check_float(f'{name}_loss_weight', w, 0.0, math.inf)
            for name, w in (
                ('balance', balance_loss_weight),
                ('z', z_loss_weight),
                ('diversity', diversity_loss_weight),
            )
        }
        self.shared_init = check_choice('shared_init', shared_init, ['average', 'middle'])
        self.router_init = check_choice('router_init', router_init, ['programmed', 'uniform'])
        # The one shared block: a `Block` whose MLP is the expert bank (attention and norms as timm).
        self.block = self.make_block(functools.partial(ExpertMlp, num_experts=self.num_experts), ExpertBlock)
        self.router = DepthRouter(self.num_experts, router_hidden_dim)
        self._ffn_cache: tuple[tuple, tuple[Tensor, Tensor, MergedFfn]] | None = None

    # ---- depth and outputs ------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """L, the number of layers (steps); setting it re-spreads the depth grid and rescales `out_indices`."""
        return self._depth

    @depth.setter
    def depth(self, value: int) -> None:
        self._depth = check_int('depth', value, 2)
        self.drop_path_rates = torch.linspace(0, self.drop_path_rate, self._depth, device='cpu').tolist()
        self.out_indices = tuple(out_depth_to_step(d, self._depth) for d in self._out_depths)
        self.global_layers = stage_ends(self._depth)

    @property
    def blocks(self) -> list:
        """The one unique block."""
        return [self.block]

    # ---- the forward ----------------------------------------------------------------------------
    @property
    def layer_blocks(self) -> tuple[int, ...]:
        """The one block at every layer."""
        return (0,) * self._depth

    def compute_settings(self, grid: tuple[int, int]) -> range:
        """K-step reViTs, K = 2..L (coordinates re-spread over K)."""
        return range(2, self._depth + 1)

    def global_layers_at(self, setting: int | None) -> tuple[int, ...]:
        """A K-step reViT is windowed as one: global at its own stage ends."""
        return self.global_layers if setting is None else stage_ends(setting)

    def fx_untraceable(self) -> str | None:
        if self.training and self.step_drop_rate > 0:
            return 'step dropout draws the steps of each image per forward (eval mode, or step_drop_rate=0, traces)'
        return None

    def iter_layers(
        self, x: Tensor, steps: tuple[Step, ...], setting: int | None, stats: ForwardStats
    ) -> Iterator[tuple[int, Tensor]]:
        """K applications of the one block, step t with the FFN merged for its depth coordinate s_t = t/(K-1):
        K = L, or a shallower reViT with the compute knob (`setting`). In training with step dropout each image
        runs its kept steps as a shorter reViT (`_iter_dropped`)."""
        if self.training and self.step_drop_rate > 0:
            yield from self._iter_dropped(x, steps, stats)
            return
        K, run = self._depth if setting is None else setting, self.block_runner()
        if self.training:
            logits = finite('router logits', logit_labels(K), self.router_logits(depth_grid(K, x.device)), self.router)
            gates, merges = self.gates_of(logits), len(steps)
            ffns = self._training_ffns(gates[:merges], merges)
        else:  # merged once and cached; the logits checked when merged (on the device: no sync), reported once
            gates, logits, ffns, fresh = self._inference_ffns(K)  # (the gates count NaN/inf logits as 0)
            if fresh:
                logits = finite('router logits', logit_labels(K), logits)
            merges = K if fresh else 0
        for step in steps:
            ffn = dict(expert_gates=gates[step.index]) if ffns is None else dict(ffn=ffns[step.index])
            x = run(self.block, x, drop_path_rate=step.drop_path_rate, layout=step.layout, **ffn)
            yield step.layer, x
        B, ran = x.shape[0], len(steps)
        weights = (torch.arange(K, device=gates.device) < ran).to(gates.dtype)  # the steps run, each by all images
        self._statistics(stats, gates, logits, K, weights, K, merges, B)

    def _iter_dropped(self, x: Tensor, steps: tuple[Step, ...], stats: ForwardStats) -> Iterator[tuple[int, Tensor]]:
        """Training with step dropout (`step_dropout.py`): each step is one block call over the C groups of images it
        runs, each with the FFN merged for its own depth coordinate (`ExpertMlp`), its results written in place into
        the state (a discarded slot's into a spare row). Image b reads layer i at its own kept step: each layer read
        (`Step.read`) but the last is gathered once after the last step, from the results of every step."""
        B, L = x.shape[0], self._depth
        G = num_groups(B, self.step_drop_groups)
        g, draw = B // G, sample_steps(G, L, self.step_drop_rate, x.device)
        C = draw.slots.shape[1]
        coords = torch.cat([depth_grid(L, x.device), draw.coords.flatten()])  # (L + L C,): the L-grid for the log
        logits = finite('router logits', logit_labels(L, C), full_precision(self.router, coords), self.router)
        gates = self.gates_of(logits)
        # Each block call merges its C FFNs (`ExpertMlp`): cheaper than one (L C)-row product (docs/methods/revit.md).
        rows_gates = gates[L:].unflatten(0, (L, C))  # (L, C, E)
        run, schedule = self.block_runner(), self.steps(None, stats.grid)
        layers = [step.layer for step in steps if step.read]
        dest = draw.destinations()
        groups = x.unflatten(0, (G, g))  # (B, N, D) -> (G, g, N, D)
        state = torch.cat([groups, groups[:C]])  # the G groups, then C spare rows (never read)
        others, results = [i for i in layers if i != L - 1], []  # the layers read before the last one
        for step in schedule:
            t = step.index
            rows = state.index_select(0, draw.slots[t]).flatten(0, 1)  # (C g, N, D), the groups this step runs
            out = run(
                self.block, rows, drop_path_rate=step.drop_path_rate, layout=step.layout, expert_gates=rows_gates[t]
            ).unflatten(0, (C, g))
            state.index_copy_(0, dest[t], out)  # in place: index_select saved no state, only its indices
            if others:
                results.append(out)
        x = state[:G].flatten(0, 1)
        reads = dict(zip(others, gather_reads(draw, torch.cat([*results, groups]), others))) if others else {}
        for i in layers:
            yield i, x if i == L - 1 else reads[i]
        stats.setting = (C / G,) * L  # the share of the images each step ran (the FLOP model's `work`)
        kept = per_image(draw.kept, g).T  # (B, L)
        stats.tables['kept_steps'] = kept
        stats.scalars['revit_kept_steps'] = kept.sum(1).float().mean()
        weights = torch.cat([torch.zeros(L, device=x.device), draw.slot_kept.flatten().float()])  # applications
        self._statistics(stats, gates, logits, L, weights, len(coords), len(coords) - L, B)

    def sample_kept_steps(self, batch: int) -> Tensor:
        """(B, L) bool: per image, the steps that survive one draw of step dropout (`step_dropout.py`)."""
        G = num_groups(batch, self.step_drop_groups)
        return per_image(sample_steps(G, self.depth, self.step_drop_rate).kept, batch // G).T

    def work(self, steps: tuple[Step, ...], setting: int | tuple[float, ...] | None, grid: tuple[int, int]) -> list:
        """Each step over every token of every image; with step dropout (`setting`: the share of the images that
        ran each of the L steps) of that share, the trailing steps no image ran left out."""
        tokens = grid[0] * grid[1] + self.num_prefix_tokens
        if not isinstance(setting, tuple):
            return [step_work(self.block, tokens, step.layout) for step in steps]
        ran = max(t for t, share in enumerate(setting) if share > 0)
        return [step_work(self.block, tokens, s.layout, setting[s.index]) for s in steps if s.index <= ran]

    # ---- router and merged FFNs -------------------------------------------------------------
    def route(self, coords: Tensor | Sequence[float]) -> tuple[Tensor, Tensor]:
        """Depth coordinates -> gates `softmax(ψ(s)/τ)` (U, E) and raw logits ψ(s) (U, E)."""
        logits = self.router_logits(coords)
        return self.gates_of(logits), logits

    def router_logits(self, coords: Tensor | Sequence[float]) -> Tensor:
        """Coordinates (U,) -> logits (U, E) in fp32: a tensor on the router's device (the forwards: `depth_grid`, made
        there; an fx proxy while traced) or Python floats (uploaded: a stream sync on a GPU, so never in a forward)."""
        if isinstance(coords, Sequence):
            coords = torch.tensor(coords, dtype=torch.float32, device=self.router.fc1.weight.device)
        return full_precision(self.router, coords)

    def gates_of(self, logits: Tensor) -> Tensor:
        """Logits (U, E) -> gates; NaN/inf logits count as 0 (the forward's finiteness check reports them)."""
        return (sanitize(logits) / self.router_temperature).softmax(-1)

    def merged_ffns(self, depth: int | None = None) -> tuple[Tensor, Tensor, MergedFfn]:
        """Gates (L, E), logits (L, E) and the L merged FFNs on the grid `s_t = t/(L-1)`."""
        K = self.depth if depth is None else check_int('depth', depth, 2)
        gates, logits = self.route(depth_grid(K, self.router.fc1.weight.device))
        return gates, logits, self.block.sharded().merge(gates)

    def _training_ffns(self, gates: Tensor, num: int | None = None) -> list[MergedFfn] | None:
        """Training: the merged FFN of every gate row (U, E) from one product, the experts read once rather than once
        per row; None with `with_cp`: each application merges its own inside its checkpointed block call, so no
        merged weights outlive it."""
        return None if self.with_cp else self.block.sharded().merge(gates).unbind(num)

    def _cache_key(self, depth: int) -> tuple:
        """What the merged FFNs depend on besides conversions (`_apply` drops the cache): depth, temperature and each
        router/expert parameter, by identity (`load_state_dict(assign=True)`) and version counter (in-place writes:
        optimizer steps, `load_state_dict`). No `data_ptr`: dynamo cannot guard on it (issue 48.3)."""
        params = (*self.router.parameters(), *self.block.mlp.parameters())
        return (depth, self.router_temperature, tuple([(id(p), p._version) for p in params]))

    def _inference_ffns(self, depth: int) -> tuple[Tensor, Tensor, list[MergedFfn], bool]:
        """Eval mode: the merged FFNs of `depth` steps, cached while autograd is off and the key holds (`_cache_key`);
        the last value: computed now. Under torch.compile and fx they are merged inside the graph at every call (no
        cache: a Python-side cache read would be a guard and a second graph, and fx would bake the weights in as
        constants; the merge costs E/N of the FFNs' work)."""
        if torch.is_grad_enabled() or torch.compiler.is_compiling() or fx.symbolic_tracing():
            gates, logits, ffn = self.merged_ffns(depth)
            return gates, logits, ffn.unbind(depth), True
        key, cache = self._cache_key(depth), self._ffn_cache  # one read: forwards may run in several threads
        if cache is not None and cache[0] == key:
            return (*cache[1], False)
        device_type = self.router.fc1.weight.device.type
        # Plain tensors (not inference tensors) in the parameters' dtype, whatever the caller's mode.
        with torch.inference_mode(False), torch.no_grad(), torch.autocast(device_type, enabled=False):
            gates, logits, ffn = self.merged_ffns(depth)
        value = (gates, logits, ffn.unbind())  # per step: no indexing in the forward
        self._ffn_cache = (key, value)  # non-finite logits too (as 0 gates): reported by the forward that merged them
        return (*value, True)

    def invalidate_cache(self) -> None:
        """Drop the eval cache of merged FFNs (needed only after writes through `p.data`, which bypass the
        version counters the cache key reads)."""
        self._ffn_cache = None

    def _apply(self, fn: Any, recurse: bool = True) -> ReViT:
        self.invalidate_cache()  # .to(), .cuda(), .half(), ...: the cached merge is in the old device and dtype
        return super()._apply(fn, recurse)

    def train(self, mode: bool = True) -> ReViT:
        if mode:
            self.invalidate_cache()  # never cache while training; free the memory
        return super().train(mode)

    # ---- statistics and auxiliary losses ----------------------------------------------------
    def _statistics(
        self,
        stats: ForwardStats,
        gates: Tensor,
        logits: Tensor,
        K: int,
        counts: Tensor,
        routed: int,
        merges: int,
        B: int,
    ) -> None:
        """Gates and usage into `stats`, the aux losses in training, and the work outside the schedule: the router
        on `routed` coordinates and `merges` expert merges, done once for the batch (counted per image). `counts`
        (U,): the (image, step) applications of each gate row, up to a common factor."""
        weights = counts / counts.sum()  # share of the (image, step) applications per coordinate
        usage = (weights.unsqueeze(1) * gates).sum(0).detach()  # mean_t g_t, for the log (not a model product)
        stats.tables['gates'] = gates[:K].detach()
        stats.scalars.update({f'revit_gate_e{e}': usage[e] for e in range(self.num_experts)})
        if self.training and self.num_experts > 1:
            stats.aux_losses = self.auxiliary_losses(gates, logits, weights)
        if merges and not (torch.compiler.is_compiling() or fx.symbolic_tracing()):  # (the FLOP model is eager's)
            fc = self.router.fc1
            stats.extra.append(OpWork('router', routed * fc.out_features * (1 + self.num_experts) / B))
            stats.extra.append(OpWork('block.mlp (expert merge)', merges * self.block.mlp.merge_macs() / B))

    def auxiliary_losses(self, gates: Tensor, logits: Tensor, weights: Tensor) -> dict[str, Tensor]:
        """Weighted aux losses (docs/methods/revit.md) of gates/logits (U, E) and per-row weights (U,) summing to 1."""
        lw, E = self.loss_weights, self.num_experts
        out = {}
        if lw['balance']:
            usage = weights @ gates  # mean_t g_t
            out['loss_revit_balance'] = lw['balance'] * (1 - torch.special.entr(usage).sum() / math.log(E))
        if lw['z']:
            out['loss_revit_z'] = lw['z'] * (weights * logits.logsumexp(-1).square()).sum()
        if lw['diversity']:
            out['loss_revit_diversity'] = lw['diversity'] * self.block.sharded().diversity()
        return out

    # ---- checkpoints and folding ------------------------------------------------------------
    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """timm/DeiT -> reViT (docs/methods/revit.md): shared attention/norms from all blocks' mean or the middle block
        (`shared_init`); expert e <- mean FFN of the e-th of E contiguous groups of blocks; the router as
        `router_init` says."""
        rest, blocks = split_timm_blocks(state_dict)
        n, E = len(blocks), self.num_experts
        if n < E:
            raise ValueError(
                f'cannot initialise num_experts={E} experts from a {n}-block checkpoint: '
                f'num_experts must be at most {n}'
            )
        shared = average_blocks(blocks) if self.shared_init == 'average' else blocks[n // 2]
        out = dict(rest)
        out.update({f'block.{k}': v for k, v in shared.items() if not k.startswith('mlp.')})
        out.update({f'block.mlp.{k}': v for k, v in experts_from_blocks(blocks, E).items()})
        out = fresh_parameters(self, out, r'^router\.')
        if self.router_init == 'programmed' and E > 1:  # gates that program depth like the stack the experts come from
            fc1 = self.router.fc1
            out.update(programmed_router(fc1.out_features, E, self.depth, PROGRAMMED_GATE, fc1.weight.dtype))
            logger.info(f"router programmed (router_init='programmed'): step t -> expert floor(t*{E}/{self.depth})")
        return out
