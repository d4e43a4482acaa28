"""MoR-ViT: token-level Mixture-of-Recursions over a middle-cycle shared unit (SPEC §4).

    image -> patch embedding -> first block (own weights, every token)
          -> recursion r = 0..N_r-1: a router picks the tokens that run the shared unit at r;
             a picked token is updated h <- h + g * (Block(h) - h) and attends to the other picked tokens only
          -> last block (own weights, every token) -> states after the requested layers

`blocks.0` is the first block, `blocks.1 .. blocks.u` the shared unit of u blocks (default 1) that every
recursion runs in order, `blocks.{u+1}` the last block: L = 2 + u * N_r layers. Routing is 'expert_choice'
(SPEC §4 default: per-recursion routers keep the top `ceil(cap_r * Np)` of the tokens chosen at r-1, CLS
always) or 'token_choice' (one router gives each token its number of recursions up front). The engine
(`token_adaptive.run_subset`) runs each shared application for the chosen tokens only, which is MoR's
recursion-wise KV caching. Decisions and measurements: docs/methods/mor_vit.md.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from .arguments import resolve_arch
from .backbone import ViTBackbone
from .checkpoint import fresh_parameters, pick_or_average_blocks, split_timm_blocks
from .checks import check_choice, check_float, check_int, check_sequence
from .flops import linear_work
from .numerics import full_precision
from .plan import Forward, Plan, Step, step_work
from .registry import register_backbone
from .token_adaptive import UPDATES, DepthSubsets, TokenSubset, capacity_tokens, run_subset, subset_work, top_k

ROUTINGS = ('expert_choice', 'token_choice')
TIMM_INITS = ('average', 'pick')
DEFAULT_ALPHA = {'expert_choice': 0.1, 'token_choice': 1.0}
OPEN_GATE = 0.99  # `timm_gates='open'`: every router's initial sigmoid/softmax weight on running


def default_capacities(num_recursions: int) -> tuple[float, ...]:
    """cap_r = (N_r - r) / N_r, r = 0..N_r-1 (SPEC §4: 1, 2/3, 1/3 for N_r = 3)."""
    return tuple((num_recursions - r) / num_recursions for r in range(num_recursions))


def _make_router(dim: int, out_features: int) -> nn.Linear:
    router = nn.Linear(dim, out_features)
    trunc_normal_(router.weight, std=0.02)
    nn.init.zeros_(router.bias)
    return router


@dataclass(frozen=True)
class RecursionStep(Step):
    """A step of MoR-ViT's plan: the recursion it belongs to (None: the first or last block), whether it is the
    recursion's first block (where the tokens are chosen), and the patch tokens expert choice keeps there."""

    recursion: int | None = None
    first: bool = False
    kept: int | None = None


class ExpertChoice:
    """One forward's expert-choice routing state (SPEC §4): hierarchical top-k per recursion. `candidates`
    (B, k) holds the patch positions chosen at the previous recursion (all before recursion 0), sorted."""

    def __init__(self, model: MoRViT, x: Tensor, fwd: Forward) -> None:
        B, N, _ = x.shape
        P = model.num_prefix_tokens
        self.model, self.fwd, self.B, self.N, self.P, self.num_patches = model, fwd, B, N, P, N - P
        self.prefix = torch.arange(P, device=x.device).expand(B, P)
        self.candidates = torch.arange(P, N, device=x.device).expand(B, N - P)
        self.recursions = torch.zeros(B, N - P, dtype=torch.long, device=x.device)  # recursions run, patch tokens
        self.bce: list[Tensor] = []
        self.chosen: list[int] = []
        self.gate_means: list[Tensor] = []
        self.everything: TokenSubset | None = None  # the all-tokens subset, made once per forward

    def select(self, r: int, x: Tensor, k: int) -> tuple[TokenSubset, Tensor]:
        """The `k` patch tokens (and CLS) that run recursion r, and their gates (in the subset's row order)."""
        B, N, P, D = self.B, self.N, self.P, x.shape[-1]
        k_prev = self.candidates.shape[1]
        if k_prev == self.num_patches:  # all tokens are candidates: score x directly (no gather)
            h = x
        else:
            h = TokenSubset.from_positions(torch.cat([self.prefix, self.candidates], 1), N).gather(x)
            h = h.view(B, P + k_prev, D)  # (B*(P+k), D) -> (B, P+k, D)
        router = self.model.routers[r]
        logits = full_precision(router, h).squeeze(-1)  # (B, P + k_prev), CLS first
        logits = self.fwd.finite(f'routers.{r} logits', f'recursion {r} (token selection)', logits, router)
        patch_logits = logits[:, P:]
        if k < k_prev:
            top = top_k(patch_logits, k).sort(1).values  # (B, k), in token order
            chosen, chosen_logits = self.candidates.gather(1, top), patch_logits.gather(1, top)
        else:
            top, chosen, chosen_logits = None, self.candidates, patch_logits
        if self.model.training:  # the auxiliary loss is a training term (as reViT's): no work at inference
            target = torch.ones_like(patch_logits, dtype=torch.float32)
            if top is not None:
                target = torch.zeros_like(target).scatter_(1, top, 1.0)
            self.bce.append(F.binary_cross_entropy_with_logits(patch_logits.float(), target))
        self.candidates = chosen
        self.chosen.append(k)
        if k == self.num_patches:  # every token, in order: no index or concatenation needed
            self.recursions.fill_(r + 1)
            gate = self.model.alpha * torch.sigmoid(logits)  # (B, N)
            self.gate_means.append(gate.detach().float().mean())
            if self.everything is None:
                self.everything = TokenSubset.everything(B, N, x.device)
            return self.everything, gate.reshape(-1).to(x.dtype)
        self.recursions.scatter_(1, chosen - P, r + 1)  # nested sets: the last write is the deepest
        gate = self.model.alpha * torch.sigmoid(torch.cat([logits[:, :P], chosen_logits], 1))  # (B, P + k)
        self.gate_means.append(gate.detach().float().mean())
        return TokenSubset.from_positions(torch.cat([self.prefix, chosen], 1), N), gate.reshape(-1).to(x.dtype)

    def finish(self) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        losses, scalars = {}, {}
        if self.bce:
            losses['loss_router_bce'] = self.model.bce_loss_weight * torch.stack(self.bce).mean()
        if self.gate_means:
            scalars['gate/mean'] = torch.stack(self.gate_means).mean()
        # The chosen sets are nested: recursion r ran the tokens that reached more than r recursions.
        scalars.update({f'sel/r{r}': (self.recursions > r).float().mean() for r in range(len(self.chosen))})
        scalars['recursions/mean'] = self.recursions.float().mean()
        return losses, scalars


class TokenChoice:
    """One forward's token-choice routing state (SPEC §4): a number of recursions per token, chosen up front
    from the states entering recursion 0 (`route`)."""

    def __init__(self, model: MoRViT, x: Tensor, fwd: Forward) -> None:
        self.model, self.fwd, self.P = model, fwd, model.num_prefix_tokens

    def route(self, x: Tensor) -> Tensor:
        """States entering recursion 0 -> each token's number of recursions (B, N), CLS every one."""
        model, P, R, B = self.model, self.P, self.model.num_recursions, x.shape[0]
        self.logits = self.fwd.finite('router logits', 'the depth assignment (before recursion 0)',
                                      full_precision(model.router, x), model.router)  # (B, N, N_r)
        probs = self.logits.softmax(-1)
        self.probs = probs[:, P:]
        self.recursions = self.logits[:, P:].detach().argmax(-1) + 1  # (B, Np) in 1..N_r
        depth = torch.cat([self.recursions.new_full((B, P), R), self.recursions], 1)  # CLS: every one
        self.gate = (model.alpha * probs.gather(-1, (depth - 1).unsqueeze(-1))).reshape(-1).to(x.dtype)  # (B*N,)
        return depth

    def select(self, r: int, x: Tensor, k: int | None = None) -> tuple[TokenSubset, Tensor]:
        active = self.subsets.active(r)
        return active, self.gate.index_select(0, active.index)

    def finish(self) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        model, R = self.model, self.model.num_recursions
        patch_logits, depth = self.logits[:, self.P:], self.recursions
        P_i = self.probs.float().mean((0, 1))  # mean router probability of depth i
        f_i = F.one_hot(depth - 1, R).float().mean((0, 1))  # fraction of tokens given depth i
        losses = {'loss_balance': model.balance_loss_weight * R * (P_i * f_i).sum(),
                  'loss_z': model.z_loss_weight * torch.logsumexp(patch_logits.float(), -1).square().mean()}
        scalars = {f'sel/r{r}': (depth > r).float().mean() for r in range(R)}
        scalars['recursions/mean'] = depth.float().mean()
        scalars['gate/mean'] = self.gate.detach().float().mean()
        return losses, scalars


@register_backbone('morvit')
class MoRViT(ViTBackbone):
    """MoR-ViT (SPEC §4): first block, a shared unit cycled N_r times with token routing, last block.

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
        router_alpha: gate scale alpha > 0. None: 0.1 for expert-choice (SPEC), 1.0 for token-choice.
        bce_loss_weight (1e-3), balance_loss_weight (0.1), z_loss_weight (1e-5): the routers' losses (SPEC §4).
        timm_init: 'average' (the shared unit <- mean of the tied layers) or 'pick' (<- block
            `shared_init_block + j`, default block 6), SPEC §6.
        update: 'interpolate' (default) `h <- h + g (Block(h) - h)` or 'additive' `h <- h + g Block(h)` (MoR's).
        timm_gates: the routers' start from a timm/DeiT checkpoint: 'open' (default, every gate at
            `OPEN_GATE` = 0.99; with `router_alpha=1.0` and full capacities a recursion applies nearly the
            whole block, DeiT's update) or 'fresh'.
        Other arguments: see `ViTBackbone`.

    Parameters: `blocks.0` first, `blocks.1..u` shared unit, `blocks.{u+1}` last; `routers.r` (expert-choice)
    or `router` (token-choice). `recursion_of_step[s]`: the recursion step s belongs to (None: first/last).
    Statistics: `aux_losses` `loss_router_bce` (expert-choice, training) or `loss_balance`, `loss_z`
    (token-choice); `scalars` `sel/r{r}`, `recursions/mean`, `gate/mean`; `token_maps['recursions']` (B, h, w).
    """
    mode_arguments = {'shared_init_block': ('timm_init', ('average',))}  # it acts with 'pick' only (checks.py)

    def __init__(self, arch: str = 'small', embed_dim: int | None = None, num_heads: int | None = None,
                 depth: int | None = None, num_recursions: int | None = None, unit_size: int = 1,
                 routing: str = 'expert_choice', capacities: Sequence[float] | None = None,
                 router_alpha: float | None = None, bce_loss_weight: float = 1e-3, balance_loss_weight: float = 0.1,
                 z_loss_weight: float = 1e-5, update: str = 'interpolate', timm_init: str = 'average',
                 shared_init_block: int = 6, timm_gates: str = 'open', **kwargs: Any) -> None:
        sizes = resolve_arch(arch, embed_dim=embed_dim, depth=depth, num_heads=num_heads)
        u = check_int('unit_size', unit_size, 1)
        R = self._check_recursions(num_recursions, depth, sizes['depth'], u)
        super().__init__(**{**sizes, 'depth': 2 + u * R}, **kwargs)
        self.num_recursions, self.unit_size = R, u
        self.routing = check_choice('routing', routing, ROUTINGS)
        self.alpha = check_float('router_alpha', DEFAULT_ALPHA[routing] if router_alpha is None else router_alpha,
                                 0.0, math.inf, low_open=True)
        self.bce_loss_weight = check_float('bce_loss_weight', bce_loss_weight, 0.0, math.inf)
        self.balance_loss_weight = check_float('balance_loss_weight', balance_loss_weight, 0.0, math.inf)
        self.z_loss_weight = check_float('z_loss_weight', z_loss_weight, 0.0, math.inf)
        self.timm_init = check_choice('timm_init', timm_init, TIMM_INITS)
        self.shared_init_block = check_int('shared_init_block', shared_init_block, 0)
        self.update = check_choice('update', update, UPDATES)
        self.timm_gates = check_choice('timm_gates', timm_gates, ['open', 'fresh'])
        self.capacities = capacities
        self.check_knobs()
        self.blocks = nn.ModuleList(self.make_block() for _ in range(u + 2))
        self.recursion_of_step: list[int | None] = [None] + [r for r in range(R) for _ in range(u)] + [None]
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
                raise ValueError(f'MoRViT: depth={depth} is not 2 + unit_size * num_recursions for unit_size={u}; '
                                 f'allowed: 2 + {u} * N_r, e.g. {2 + u}, {2 + 2 * u}, ...')
            if num_recursions is not None and 2 + u * num_recursions != depth:
                raise ValueError(f'MoRViT: depth={depth} and num_recursions={num_recursions} disagree (depth = 2 + '
                                 f'unit_size * num_recursions with unit_size={u}); pass one of them')
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
                raise ValueError("compute acts on MoR-ViT through the capacities of routing='expert_choice'; "
                                 f"routing='token_choice' takes compute=None, got compute={compute!r}")
            if caps is not None:
                raise ValueError("capacities apply to routing='expert_choice' only (token-choice depths come "
                                 f'from its router); pass capacities=None, got {caps!r}')
            return
        if caps is None:
            return
        caps = check_sequence('capacities', caps)
        if len(caps) != R:
            raise ValueError(f'capacities must have num_recursions={R} entries (one per recursion), got '
                             f'{len(caps)}: {caps}')
        for c in caps:
            check_float('capacities entry (a fraction of the tokens)', c, 0.0, 1.0, low_open=True)
        if any(b > a for a, b in zip(caps, caps[1:])):
            raise ValueError('capacities must be non-increasing for expert-choice routing (hierarchical '
                             f'top-k: a recursion chooses among the tokens of the one before), got {caps}')

    @property
    def capacity_schedule(self) -> tuple[float, ...]:
        """The capacities in force: `capacities`, or the default (N_r - r)/N_r when it is None."""
        if self.capacities is None:
            return default_capacities(self.num_recursions)
        return tuple(float(c) for c in self.capacities)

    # ---- the plan -----------------------------------------------------------------------------
    def default_setting(self) -> tuple[float, ...] | None:
        return self.capacity_schedule if self.routing == 'expert_choice' else None

    def full_setting(self) -> tuple[float, ...] | None:
        """Full capacities (expert choice); every token through every recursion (token choice: None)."""
        return (1.0,) * self.num_recursions if self.routing == 'expert_choice' else None

    def settings(self, grid: tuple[int, int]) -> list[tuple[float, ...]]:
        """Every capacity in force times j / Np, j = 1..Np (Np patch tokens)."""
        num_patches, caps = grid[0] * grid[1], self.capacity_schedule
        return [tuple(c * ((i + 1) / num_patches) for c in caps) for i in range(num_patches)]

    def plan(self, setting: Sequence, grid: tuple[int, int], layers: Sequence[int]) -> Plan:
        """First block, the unit N_r times on the tokens chosen, last block. `setting`: expert choice's
        capacities; token choice's alive[r][b], the tokens of image b running recursion r (None: all)."""
        P, D, u = self.num_prefix_tokens, self.embed_dim, self.unit_size
        tokens = grid[0] * grid[1] + P
        steps = [RecursionStep(0, 0, 0, step_work(self.blocks[0], tokens, self.windows(0, grid)),
                               self.windows(0, grid), self.drop_path_rates[0])]
        k_prev = tokens - P
        for r in range(self.num_recursions):
            if self.routing == 'expert_choice':
                kept = min(k_prev, capacity_tokens(setting[r], tokens - P))
                before = (linear_work(f'routers.{r}', P + k_prev, D, 1),)
                active, k_prev = TokenSubset(None, (P + kept,), tokens), kept
            else:
                kept, before = None, (linear_work('router', tokens, D, self.num_recursions),) if r == 0 else ()
                active = TokenSubset(None, (tokens,) if setting is None else tuple(setting[r]), tokens)
            for j in range(u):
                s = 1 + r * u + j
                windows = self.windows(s, grid)
                steps.append(RecursionStep(s, s, 1 + j, subset_work(self.blocks[1 + j], active, cached_keys=False,
                                                                    windows=windows), windows,
                                           self.drop_path_rates[s], before if j == 0 else (),
                                           recursion=r, first=j == 0, kept=kept))
        s = self.depth - 1
        steps.append(RecursionStep(s, s, u + 1, step_work(self.blocks[u + 1], tokens, self.windows(s, grid)),
                                   self.windows(s, grid), self.drop_path_rates[s]))
        return Plan(tuple(steps), tuple(layers), final=s).until_outputs()

    def forward_states(self, x: Tensor, layers: Sequence[int], fwd: Forward) -> list[Tensor]:
        """Runs the plan (instead of `run`: token choice's plan is only known after its router). Expert choice:
        the plan of the capacities in force (or the compute knob's). Token choice: the first block, the router's
        depths, then their plan."""
        self.check_knobs(fwd.compute)
        states: list[Tensor | None] = [None] * len(layers)
        if self.routing == 'expert_choice':
            setting = self.default_setting() if fwd.compute is None else self.setting_within(fwd.compute, fwd.grid)
            fwd.plan = self.plan(setting, fwd.grid, layers)
            routing, start = ExpertChoice(self, x, fwd), 0
        else:
            first = self.plan(None, fwd.grid, layers).steps[0]
            x = self.apply_block(self.blocks[0], x, first)
            routing, start = TokenChoice(self, x, fwd), 1
            # In this frame, not in `route`: torch.compile resumes right after the host read of the counts.
            routing.subsets = DepthSubsets(routing.route(x), self.num_recursions)
            fwd.plan = self.plan(routing.subsets.alive, fwd.grid, layers)
            for j in fwd.plan.reads(0):
                states[j] = x
        inplace = not torch.is_grad_enabled()  # inference: update rows in place, clone what is kept
        plan, selection = fwd.plan, None
        for i in range(start, len(plan.steps)):
            step, block = plan.steps[i], self.blocks[plan.steps[i].block]
            if step.recursion is None:  # first / last block: every token
                x = self.apply_block(block, x, step)
            else:
                if step.first:
                    selection = routing.select(step.recursion, x, step.kept)
                active, gate = selection
                x = self.run_gated(block, x, active, gate, step, inplace and not active.is_full)
            for j in plan.reads(i):
                states[j] = x.clone() if inplace and i < len(plan.steps) - 1 else x
        losses, scalars = routing.finish()
        fwd.stats.aux_losses, fwd.stats.token_maps['recursions'] = losses, routing.recursions
        fwd.stats.scalars.update(scalars)
        return states

    def run_gated(self, block: nn.Module, x: Tensor, active: TokenSubset, gate: Tensor, step: Step,
                  inplace: bool = False) -> Tensor:
        """The gated update (`update`) for the `active` tokens, attention among them (checkpointed like
        `apply_block` when asked)."""
        rate, windows = step.drop_path_rate, step.windows
        if self.with_cp and self.training and torch.is_grad_enabled():
            return checkpoint(_gated_states, block, x, active, gate, self.update, rate, windows, use_reentrant=False)
        return run_subset(block, x, active, gate=gate, update=self.update, drop_path_rate=rate, inplace=inplace,
                          windows=windows)[0]

    # ---- weights ------------------------------------------------------------------------------
    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """first <- timm block 0, last <- the last block, shared unit <- the mean of the tied middle layers or a
        picked block (`timm_init`, SPEC §6); the routers start as `timm_gates` says."""
        rest, blocks = split_timm_blocks(state_dict)
        n, u = len(blocks), self.unit_size
        if self.timm_init == 'average':
            if n < u + 2:
                raise ValueError(f'timm_init="average" needs a checkpoint with at least unit_size + 2 = {u + 2} '
                                 f'blocks (first, {u} tied middle group(s), last), got {n}')
            unit = [[i for i in range(1, n - 1) if (i - 1) % u == j] for j in range(u)]
        else:
            if n < 2 or self.shared_init_block + u > n:
                raise ValueError(f'shared_init_block={self.shared_init_block} with unit_size={u} needs blocks '
                                 f'{self.shared_init_block}..{self.shared_init_block + u - 1} of this {n}-block '
                                 f'checkpoint; allowed: 0..{n - u}')
            unit = [[self.shared_init_block + j] for j in range(u)]
        rest.update(pick_or_average_blocks(blocks, [[0], *unit, [n - 1]], self.timm_init, prefix='blocks'))
        out = fresh_parameters(self, rest, r'^routers?\.')
        if self.timm_gates == 'open':
            if self.routing == 'expert_choice':  # sigmoid(b) = OPEN_GATE for every token
                for r in range(self.num_recursions):
                    out[f'routers.{r}.bias'] = torch.full_like(out[f'routers.{r}.bias'],
                                                               math.log(OPEN_GATE / (1 - OPEN_GATE)))
            else:  # softmax puts OPEN_GATE on the deepest depth: every token runs every recursion
                R, bias = self.num_recursions, torch.zeros_like(out['router.bias'])
                if R > 1:
                    bias[-1] = math.log(OPEN_GATE * (R - 1) / (1 - OPEN_GATE))
                out['router.bias'] = bias
        return out


def _gated_states(block: nn.Module, x: Tensor, active: TokenSubset, gate: Tensor, update: str, rate: float,
                  windows: Any) -> Tensor:
    return run_subset(block, x, active, gate=gate, update=update, drop_path_rate=rate, windows=windows)[0]
