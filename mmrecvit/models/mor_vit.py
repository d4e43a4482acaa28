"""MoR-ViT: token-level Mixture-of-Recursions over a middle-cycle shared unit (docs/methods/mor_vit.md).

    image -> patch embedding -> first block (own weights, every token)
          -> recursion r = 0..N_r-1: a router picks the tokens that run the shared unit at r;
             a picked token is updated h <- h + g * (Block(h) - h) and attends to the other picked tokens only
          -> last block (own weights, every token) -> states after the requested layers

`blocks.0` is the first block, `blocks.1 .. blocks.u` the shared unit of u blocks (default 1) that every
recursion runs in order, `blocks.{u+1}` the last block: L = 2 + u * N_r layers. Routing is 'expert_choice'
(docs/methods/mor_vit.md default: per-recursion routers keep the top `ceil(cap_r * Np)` of the tokens chosen at r-1, CLS
always) or 'token_choice' (one router gives each token its number of recursions up front). The engine
(`token_adaptive.run_subset`) runs each shared application for the chosen tokens only, which is MoR's
recursion-wise KV caching; token choice trains on the same function with static shapes (`run_masked`: every token
computed, the routed ones kept; its counts are data, read to the host once by the engine). Decisions and
measurements: docs/methods/mor_vit.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from timm.layers import trunc_normal_
from torch import Tensor, nn

from . import token_adaptive
from .arguments import renamed, resolve_sizes
from .backbone import ViTBackbone
from .checkpoint import fresh_parameters, pick_or_average_blocks, split_timm_blocks
from .checks import check_choice, check_float, check_int, check_sequence
from .flops import Work, linear_work
from .mor_routing import ExpertChoice, MaskedTokenChoice, TokenChoice, token_choice
from .numerics import RouterLinear
from .registry import register_backbone
from .schedule import Step, step_work
from .stats import ForwardStats
from .token_adaptive import UPDATES, DepthSubsets, TokenSubset, capacity_tokens, subset_work

ROUTINGS = ('expert_choice', 'token_choice')
SHARED_INITS = ('average', 'pick')
DEFAULT_ALPHA = {'expert_choice': 0.1, 'token_choice': 1.0}
OPEN_GATE = 0.99  # `router_init='open'`: every router's initial sigmoid/softmax weight on running


def default_capacities(num_recursions: int) -> tuple[float, ...]:
    """cap_r = (N_r - r) / N_r, r = 0..N_r-1 (docs/methods/mor_vit.md: 1, 2/3, 1/3 for N_r = 3)."""
    return tuple((num_recursions - r) / num_recursions for r in range(num_recursions))


def kept_tokens(capacities: Sequence[float], num_patches: int) -> list[int]:
    """The patch tokens expert choice keeps at each recursion: ceil(cap_r Np), at most those kept before."""
    kept, k = [], num_patches
    for cap in capacities:  # hierarchical: at most the tokens of the recursion before
        kept.append(k := min(k, capacity_tokens(cap, num_patches)))
    return kept


def _make_router(dim: int, out_features: int) -> nn.Linear:
    router = RouterLinear(dim, out_features)  # fp32 products (`numerics.py`, "Routers decide in fp32")
    trunc_normal_(router.weight, std=0.02)
    nn.init.zeros_(router.bias)
    return router


@register_backbone('morvit')
class MoRViT(ViTBackbone):
    """MoR-ViT (docs/methods/mor_vit.md): first block, a shared unit cycled N_r times with token routing, last block.

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' (aliases 'ti', 's', 'b', 'l'); `embed_dim`, `num_heads` and
            `depth` override the table.
        depth: L = 2 + unit_size * num_recursions layers; given alone it sets num_recursions = (L - 2) /
            unit_size (default: `arch`'s depth, 12: N_r = 10).
        num_recursions: N_r, recursions of the shared unit, >= 1 (must agree with `depth` when both are given).
        unit_size: blocks in the shared unit (default 1), >= 1.
        routing: 'expert_choice' (default) or 'token_choice' (see the module docstring).
        capacities: expert-choice only: N_r non-increasing fractions in (0, 1] of the patch tokens that run
            each recursion. None: (N_r - r)/N_r. An inference knob (a plain attribute, checked at every forward).
        compute: the test-time knob through scaled capacities (expert-choice): every capacity in force times
            j / Np, j the largest whose FLOPs are <= compute x those of full capacities; token-choice routing
            takes compute=None (its depths come from its router).
        router_alpha: gate scale alpha > 0. None: 0.1 for expert-choice (docs/methods/mor_vit.md), 1.0 for token-choice.
        bce_loss_weight (1e-3, expert-choice), balance_loss_weight (0.1) and z_loss_weight (1e-5) (token-choice):
            the routers' losses (docs/methods/mor_vit.md); each is refused in the other routing.
        shared_init: 'average' (the shared unit <- mean of the tied layers) or 'pick' (<- block
            `shared_init_block + j`, default block 6), docs/methods/mor_vit.md.
        update: 'interpolate' (default) `h <- h + g (Block(h) - h)` or 'additive' `h <- h + g Block(h)` (MoR's).
        router_init: the routers' start from a timm/DeiT checkpoint: 'open' (default, every gate at
            `OPEN_GATE` = 0.99; with `router_alpha=1.0` and full capacities a recursion applies nearly the
            whole block, DeiT's update) or 'fresh'.
        Other arguments: see `ViTBackbone`.

    Parameters: `blocks.0` first, `blocks.1..u` shared unit, `blocks.{u+1}` last; `routers.r` (expert-choice)
    or `router` (token-choice). `layer_recursions[i]`: the recursion layer i belongs to (None: first/last).
    Statistics: `aux_losses` `loss_router_bce` (expert-choice, training) or `loss_balance`, `loss_z`
    (token-choice); `scalars` `sel/r{r}`, `recursions/mean`, `gate/mean`; `token_maps['recursions']` (B, h, w).
    """

    # Arguments that act in one mode only (checks.py refuses them in the others).
    mode_arguments = {
        'shared_init_block': ('shared_init', ('average',)),
        'bce_loss_weight': ('routing', ('token_choice',)),
        'balance_loss_weight': ('routing', ('expert_choice',)),
        'z_loss_weight': ('routing', ('expert_choice',)),
    }

    def __init__(
        self,
        arch: str = 'small',
        *,
        depth: int | None = None,
        num_recursions: int | None = None,
        unit_size: int = 1,
        routing: str = 'expert_choice',
        capacities: Sequence[float] | None = None,
        router_alpha: float | None = None,
        bce_loss_weight: float = 1e-3,
        balance_loss_weight: float = 0.1,
        z_loss_weight: float = 1e-5,
        update: str = 'interpolate',
        shared_init: str = 'average',
        shared_init_block: int = 6,
        router_init: str = 'open',
        **kwargs: Any,
    ) -> None:
        sizes = resolve_sizes(arch, depth, kwargs)
        shared_init = renamed('MoRViT', kwargs, 'timm_init', 'shared_init', shared_init, 'average')
        router_init = renamed('MoRViT', kwargs, 'timm_gates', 'router_init', router_init, 'open')
        u = check_int('unit_size', unit_size, 1)
        R = self._check_recursions(num_recursions, depth, sizes['depth'], u)
        super().__init__(**{**sizes, 'depth': 2 + u * R}, **kwargs)
        self.num_recursions, self.unit_size = R, u
        self.routing = check_choice('routing', routing, ROUTINGS)
        self.alpha = check_float(
            'router_alpha',
            DEFAULT_ALPHA[routing] if router_alpha is None else router_alpha,
            0.0,
            math.inf,
            low_open=True,
        )
        self.bce_loss_weight = check_float('bce_loss_weight', bce_loss_weight, 0.0, math.inf)
        self.balance_loss_weight = check_float('balance_loss_weight', balance_loss_weight, 0.0, math.inf)
        self.z_loss_weight = check_float('z_loss_weight', z_loss_weight, 0.0, math.inf)
        self.shared_init = check_choice('shared_init', shared_init, SHARED_INITS)
        self.shared_init_block = check_int('shared_init_block', shared_init_block, 0)
        self.update = check_choice('update', update, UPDATES)
        self.router_init = check_choice('router_init', router_init, ['open', 'fresh'])
        self.capacities = capacities
        self.check_knobs()
        self.blocks = nn.ModuleList(self.make_block() for _ in range(u + 2))
        self.layer_recursions: list[int | None] = [None] + [r for r in range(R) for _ in range(u)] + [None]
        self.layer_blocks = (0, *[1 + j for _ in range(R) for j in range(u)], u + 1)  # the block each layer runs
        if routing == 'expert_choice':
            self.routers = nn.ModuleList(_make_router(self.embed_dim, 1) for _ in range(R))
        else:
            self.router = _make_router(self.embed_dim, R)

    @staticmethod
    def _check_recursions(num_recursions: int | None, depth: int | None, arch_depth: int, u: int) -> int:
        """N_r from `num_recursions`, or from `depth` (L = 2 + u N_r), or as deep as the arch."""
        if depth is not None:
            check_int('depth (2 + unit_size * num_recursions layers)', depth, 2 + u)
            if (depth - 2) % u:
                raise ValueError(
                    f'MoRViT: depth={depth} is not 2 + unit_size * num_recursions for unit_size={u}; '
                    f'allowed: 2 + {u} * N_r, e.g. {2 + u}, {2 + 2 * u}, ...'
                )
            if num_recursions is not None and 2 + u * num_recursions != depth:
                raise ValueError(
                    f'MoRViT: depth={depth} and num_recursions={num_recursions} disagree (depth = 2 + '
                    f'unit_size * num_recursions with unit_size={u}); pass one of them'
                )
            return (depth - 2) // u
        if num_recursions is None:  # as deep as the arch
            num_recursions = max(1, (arch_depth - 2) // u)
        return check_int('num_recursions (N_r)', num_recursions, 1)

    def check_knobs(self, compute: float | None = None) -> None:
        """Validate `capacities` and `compute` (the attribute, or a forward's; at construction and at every
        forward: plain attributes)."""
        caps, R, compute = self.capacities, self.num_recursions, self.compute if compute is None else compute
        if self.routing == 'token_choice':
            if compute is not None:
                raise ValueError(
                    "compute acts on MoR-ViT through the capacities of routing='expert_choice'; "
                    f"routing='token_choice' takes compute=None, got compute={compute!r}"
                )
            if caps is not None:
                raise ValueError(
                    "capacities apply to routing='expert_choice' only (token-choice depths come "
                    f'from its router); pass capacities=None, got {caps!r}'
                )
            return
        if caps is None:
            return
        caps = check_sequence('capacities', caps)
        if len(caps) != R:
            raise ValueError(
                f'capacities must have num_recursions={R} entries (one per recursion), got {len(caps)}: {caps}'
            )
        for c in caps:
            check_float('capacities entry (a fraction of the tokens)', c, 0.0, 1.0, low_open=True)
        if any(b > a for a, b in zip(caps, caps[1:])):
            raise ValueError(
                'capacities must be non-increasing for expert-choice routing (hierarchical '
                f'top-k: a recursion chooses among the tokens of the one before), got {caps}'
            )

    @property
    def capacity_schedule(self) -> tuple[float, ...]:
        """The capacities in force: `capacities`, or the default (N_r - r)/N_r when it is None."""
        if self.capacities is None:
            return default_capacities(self.num_recursions)
        return tuple(float(c) for c in self.capacities)

    # ---- settings and the forward ---------------------------------------------------------------
    static_schedule = True  # first, N_r x the unit, last at every setting; the routers decide the tokens
    # Token choice in training: the masked path (`token_adaptive.run_masked`: static shapes, no host read, the dense
    # FLOPs); False: the subset path as in eval (the parity tests compare the two:
    # tests/models/test_mor_token_choice_training.py).
    masked_training = True
    in_place_reads = True  # inference updates the chosen rows in place

    @property
    def own_setting(self) -> tuple[float, ...] | None:
        """Expert choice: the capacities in force (checked: a plain attribute); token choice: its router decides."""
        self.check_knobs()
        return self.capacity_schedule if self.routing == 'expert_choice' else None

    def capacity_settings(self, grid: tuple[int, int]) -> list[tuple[float, ...]]:
        """The compute knob's candidates (expert choice), smallest first: every capacity in force times j / Np,
        j = 1..Np (Np patch tokens)."""
        num_patches, caps = grid[0] * grid[1], self.capacity_schedule
        return [tuple(c * ((i + 1) / num_patches) for c in caps) for i in range(num_patches)]

    def compute_settings(self, grid: tuple[int, int]) -> list[tuple[float, ...]]:
        return self.capacity_settings(grid)

    def setting_within(self, fraction: float, grid: tuple[int, int]) -> tuple[float, ...]:
        self.check_knobs(fraction)  # token choice takes no compute
        return super().setting_within(fraction, grid)

    def fx_untraceable(self) -> str:
        return "the routers pick the tokens each recursion runs, per image (subsets built from the routers' scores)"

    def iter_layers(
        self, x: Tensor, steps: tuple[Step, ...], capacities: Sequence[float] | None, stats: ForwardStats
    ) -> Iterator[tuple[int, Tensor]]:
        """The first block on every token; N_r recursions of the shared unit, each on the tokens routed to it
        (the gated update `update`, attention among them: `token_adaptive.run_subset`); the last block on every
        token. Expert choice picks the tokens of each recursion among those of the one before (`capacities`: in
        force, or the compute knob's); token choice gives every token its recursions after the first block, and in
        training runs every recursion on every token with the routed tokens' keys and updates (`run_masked`: the
        same function with static shapes, no host read of the counts)."""
        run, inplace, steps = self.block_runner(), not torch.is_grad_enabled(), iter(steps)  # inference: in place
        first = next(steps)  # the first block, on every token
        x = run(first.block, x, drop_path_rate=first.drop_path_rate, layout=first.layout)
        yield first.layer, x
        P, R = self.num_prefix_tokens, self.num_recursions  # the routers read the states entering recursion 0
        if self.routing == 'expert_choice':
            routing, num_patches = ExpertChoice(self, x), x.shape[1] - P
            kept = self._schedules.get(('kept', capacities, num_patches), lambda: kept_tokens(capacities, num_patches))
        elif self.training and self.masked_training:  # static shapes, no host read: every token, the routed kept
            routing, kept = MaskedTokenChoice(self, token_choice(self, x)), [None] * R
            stats.setting = None  # every recursion on every token: what the masked path computes (`work`)
        else:
            route = token_choice(self, x)
            # In this frame, not in a callee: torch.compile resumes right after the host read of the counts.
            routing, kept = TokenChoice(self, route, DepthSubsets(route.token_recursions, R)), [None] * R
            stats.setting = tuple(map(tuple, routing.subsets.alive))
        unit_start = self.unit_start  # the shared unit's first block: a recursion starts
        for step in steps:
            block, r = step.block, self.layer_recursions[step.index]
            kw = dict(drop_path_rate=step.drop_path_rate, layout=step.layout)
            if r is None:  # the last block, on every token
                x = run(block, x, **kw)
            else:
                if block is unit_start:  # recursion r starts: the tokens routed to it and their gates
                    active, gate = routing.select(r, x, kept[r])
                if routing.masked:  # a (B, N) mask and (B, N) gates
                    x = run(token_adaptive.run_masked, block, x, active, residual_gate=gate, update=self.update, **kw)
                else:
                    subset = dict(residual_gate=gate, update=self.update, inplace=inplace and not active.is_full)
                    x = run(token_adaptive.run_subset, block, x, active, **subset, **kw)
            yield step.layer, x
        losses, scalars = routing.finish()
        stats.aux_losses, stats.token_maps['recursions'] = losses, routing.recursions
        stats.scalars.update(scalars)

    @property
    def unit_start(self) -> nn.Module | None:
        """The shared unit's first block (None when pruned at build with no recursion left, `pruning.py`)."""
        return self.blocks[1] if len(self.blocks) > 1 else None

    def drop_unreached(self, steps: Sequence[tuple[int, int]]) -> None:
        """Pruned at build (`pruning.py`): expert choice's routers of the recursions the forward never starts."""
        started = [r for r in (self.layer_recursions[t] for t, _ in steps) if r is not None]
        if self.routing == 'expert_choice':
            del self.routers[max(started, default=-1) + 1 :]

    def work(self, steps: tuple[Step, ...], setting: Sequence | None, grid: tuple[int, int]) -> list[Work]:
        """The first block, the unit on the tokens chosen for each recursion (attention among them) after its router,
        the last block. `setting`: expert choice's capacities (None: all 1); token choice's alive[r][b], the tokens
        of image b running recursion r (None: all)."""
        P, D = self.num_prefix_tokens, self.embed_dim
        tokens = grid[0] * grid[1] + P
        work: list[Work] = []
        k_prev, unit_start = tokens - P, self.unit_start
        for step in steps:
            r = self.layer_recursions[step.index]
            if r is None:
                work.append(step_work(step.block, tokens, step.layout))
                continue
            if step.block is unit_start and self.routing == 'expert_choice':  # recursion r starts: router, tokens
                kept = min(k_prev, capacity_tokens(1.0 if setting is None else setting[r], tokens - P))
                work.append(linear_work(f'routers.{r}', P + k_prev, D, 1))
                active, k_prev = TokenSubset(None, (P + kept,), tokens), kept
            elif step.block is unit_start:
                if r == 0:
                    work.append(linear_work('router', tokens, D, self.num_recursions))
                active = TokenSubset(None, (tokens,) if setting is None else tuple(setting[r]), tokens)
            work.append(subset_work(step.block, active, cached_keys=False, layout=step.layout))
        return work

    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """first <- timm block 0, last <- the last block, shared unit <- the mean of the tied middle layers or a
        picked block (`shared_init`, docs/methods/mor_vit.md); the routers start as `router_init` says."""
        rest, blocks = split_timm_blocks(state_dict)
        n, u = len(blocks), self.unit_size
        if self.shared_init == 'average':
            if n < u + 2:
                raise ValueError(
                    f'shared_init="average" needs a checkpoint with at least unit_size + 2 = {u + 2} '
                    f'blocks (first, {u} tied middle group(s), last), got {n}'
                )
            unit = [[i for i in range(1, n - 1) if (i - 1) % u == j] for j in range(u)]
        else:
            if n < 2 or self.shared_init_block + u > n:
                raise ValueError(
                    f'shared_init_block={self.shared_init_block} with unit_size={u} needs blocks '
                    f'{self.shared_init_block}..{self.shared_init_block + u - 1} of this {n}-block '
                    f'checkpoint; allowed: 0..{n - u}'
                )
            unit = [[self.shared_init_block + j] for j in range(u)]
        rest.update(pick_or_average_blocks(blocks, [[0], *unit, [n - 1]], self.shared_init, prefix='blocks'))
        out = fresh_parameters(self, rest, r'^routers?\.')
        if self.router_init == 'open':
            if self.routing == 'expert_choice':  # sigmoid(b) = OPEN_GATE for every token
                for r in range(len(self.routers)):  # those it owns (pruned at build: the recursions it runs)
                    out[f'routers.{r}.bias'] = torch.full_like(
                        out[f'routers.{r}.bias'], math.log(OPEN_GATE / (1 - OPEN_GATE))
                    )
            else:  # softmax puts OPEN_GATE on the deepest depth: every token runs every recursion
                R, bias = self.num_recursions, torch.zeros_like(out['router.bias'])
                if R > 1:
                    bias[-1] = math.log(OPEN_GATE * (R - 1) / (1 - OPEN_GATE))
                out['router.bias'] = bias
        return out
