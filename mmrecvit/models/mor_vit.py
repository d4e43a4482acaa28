"""MoR-ViT: token-level Mixture-of-Recursions over a middle-cycle shared unit (SPEC §4).

    image -> patch embedding -> first block (own weights, every token)
          -> recursion r = 0..N_r-1: a router picks the tokens that run the shared unit at r;
             a picked token is updated h <- h + g * (Block(h) - h) and attends to the other
             picked tokens only; the rest keep their state
          -> last block (own weights, every token) -> states after the requested steps

Middle-cycle sharing (SPEC §4): `blocks.0` is the first block, `blocks.1 .. blocks.u` the shared
unit of u blocks (default u = 1) that every recursion runs in order, `blocks.{u+1}` the last block.
Application step s runs `blocks[self.schedule[s]]`: L = 2 + u * N_r steps (12 by default).

Routing (`routing`):

* 'expert_choice' (default, SPEC §4): one router Linear(D->1) per recursion scores the tokens still
  in play; the top `ceil(cap_r * Np)` patch tokens of those chosen at r-1 continue (hierarchical
  top-k, so the chosen set only shrinks); CLS always continues. Gate `g = alpha * sigmoid(logit)`.
  Auxiliary BCE loss between each router's logits and its own selection (weight 1e-3).
* 'token_choice' (SPEC §4): one router Linear(D->N_r), softmax, on the states entering recursion 0
  gives every patch token its number of recursions d = argmax + 1 up front (CLS: N_r); a token runs
  recursions 0..d-1. Balance loss `N_r * sum_i P_i f_i` (0.1) and z-loss (1e-5).

Execution: the token-adaptive engine (`token_adaptive.run_subset` with `kv_cache=None`) runs each
shared application for the chosen tokens only -- queries, keys, values, norms and MLP -- which is
exactly MoR's recursion-wise KV caching (attention among the tokens of the recursion), so the saving
is real in training and inference alike. The first and last blocks are plain dense blocks.

Decisions (SPEC §4 leaves them open; constructor arguments where cheap):

* (decision) capacities are fractions of the patch tokens: recursion r keeps
  k_r = ceil(cap_r * Np) patch tokens (at least 1), CLS comes on top. Default cap_r = (N_r - r)/N_r
  (1, 2/3, 1/3 for N_r = 3, SPEC). `capacities` is an inference knob (a plain attribute, validated at
  every forward): the routers' scores do not depend on it, so a trained model runs at any
  capacities without retraining; tokens left out keep their state, so every output map stays
  defined for every token. Capacities must be non-increasing (hierarchical top-k).
* (decision) the expert-choice router scores a token from its raw state h before the recursion
  (MoR); routers are initialised like timm's linears (truncated normal, std 0.02, zero bias): a zero
  init would tie every score and make the first selections arbitrary. CLS's gate comes from the same
  router (the update rule is the same for every chosen token); CLS is excluded from the BCE loss
  (its selection is forced, not the router's). The BCE is the mean over the recursions run of the
  mean over each recursion's candidate patch tokens.
* (decision) token-choice gate `g = alpha * p_d`, the softmax weight of the executed depth (MoR's
  token-choice gating; CLS uses p_{N_r}); alpha defaults to 1 for token-choice (a softmax over N_r
  depths is already ~1/N_r at initialisation) and to 0.1 for expert-choice (SPEC). Depth is the
  argmax in training too (no sampling): the router learns through g and the two losses. Tokens of
  recursion r attend among the tokens still running r (as expert-choice).
* (decision) with a unit of u > 1 blocks the chosen set and the gate are fixed per recursion and
  the gated update is applied at every block application of the unit (so every application step
  has a well-defined state for `out_indices`).
* (decision) a token's `token_maps['recursions']` (mean: `scalars['recursions/mean']`) = the number of
  recursions it ran (0..N_r; every token also runs the first and last block).
* (decision, measured) batch padding counts: expert choice keeps ceil(capacity * N) of an image's N
  patch tokens, the zero tokens mmdet pads it with included (the paper's rule; the pad extent is not
  excluded). `tools/analysis_tools/padding_effect.py` on two toy Mask R-CNNs (300 iterations each,
  8 val images): a 256x160 image padded to 256x256 (37.5 % padding) gives its real tokens 2.65
  recursions on average instead of 2.50 alone (padding 2.24) in one, 2.12 instead of 2.50 (padding
  3.13) in the other; in both ~40 % of the real tokens change their count (40 %, 40.9 %), the
  direction depending on how the router scores the zero tokens. Batch-1 tests of non-square images
  therefore route differently from padded training batches; compare methods at the same batching.
* (decision, SPEC §6) from a timm/DeiT checkpoint of n blocks: first <- block 0, last <- block n-1;
  shared unit block j <- mean of the middle blocks i = 1..n-2 with (i-1) % u == j (`timm_init=
  'average'`, MoR's "average the tied layers": with n = L they are exactly the layers the unit
  replaces), or <- block `shared_init_block + j` (`timm_init='pick'`); routers fresh.
* Layer-wise LR decay: `schedule` lists the unique block of every step, so `ViTBackbone`'s default
  `layer_positions` applies (shared blocks at the mean of their positions, routers lr scale 1).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from .checkpoint import fresh_parameters, pick_or_average_blocks, split_timm_blocks
from .checks import check_choice, check_float, check_int, check_renamed, check_sequence
from .compute import largest_within
from .flops import OpWork, conv_work, linear_work, total_flops
from .stats import ForwardStats
from .token_adaptive import UPDATES, DepthPlan, TokenSubset, run_subset, subset_work
from .vit import ARCH_SETTINGS, ViTBackbone, check_out_indices, full_precision, resolve_arch, stage_ends, tracing

ROUTINGS = ('expert_choice', 'token_choice')
TIMM_INITS = ('average', 'pick')
DEFAULT_ALPHA = {'expert_choice': 0.1, 'token_choice': 1.0}
OPEN_GATE = 0.99  # `timm_gates='open'`: every router's initial sigmoid/softmax weight on running


def default_capacities(num_recursions: int) -> tuple[float, ...]:
    """cap_r = (N_r - r) / N_r, r = 0..N_r-1 (SPEC §4: 1, 2/3, 1/3 for N_r = 3)."""
    return tuple((num_recursions - r) / num_recursions for r in range(num_recursions))


def top_k(scores: Tensor, k: int) -> Tensor:
    """Indices (B, k) of the k highest scores per row, ties broken by position (the lower first).

    Eagerly a stable sort: `torch.topk` breaks ties differently on different devices. While
    exporting, `topk` (ONNX's TopK, which breaks ties the same way; a stable sort has no ONNX op).
    """
    if tracing():
        return scores.topk(k, dim=1).indices
    return scores.sort(dim=1, descending=True, stable=True).indices[:, :k]


def capacity_tokens(capacity: float, num_patches: int) -> int:
    """Patch tokens kept at capacity `capacity`: ceil(cap * Np), at least 1, with `cap` as the nearest
    fraction of denominator <= 10^6 (so 0.7 * 10 is 7, not 8) and integer arithmetic only, which a
    symbolic Np (export with a dynamic image size) supports."""
    fraction = Fraction(capacity).limit_denominator(10 ** 6)
    return max(1, -(-num_patches * fraction.numerator // fraction.denominator))


def _make_router(dim: int, out_features: int) -> nn.Linear:
    router = nn.Linear(dim, out_features)
    trunc_normal_(router.weight, std=0.02)
    nn.init.zeros_(router.bias)
    return router


class ExpertChoice:
    """One forward's expert-choice routing state (SPEC §4): hierarchical top-k per recursion.

    `candidates` (B, k) holds the patch positions chosen at the previous recursion (all patch
    tokens before recursion 0), sorted; every image keeps the same number of tokens.
    """

    def __init__(self, model: MoRViT, x: Tensor) -> None:
        B, N, _ = x.shape
        P = model.num_prefix_tokens
        self.model, self.B, self.N, self.P = model, B, N, P
        self.num_patches = N - P
        device = x.device
        self.prefix = torch.arange(P, device=device).expand(B, P)
        self.candidates = torch.arange(P, N, device=device).expand(B, N - P)
        self.capacities = model.capacity_schedule
        self.recursions = torch.zeros(B, N - P, dtype=torch.long, device=device)  # recursions run, patch tokens
        self.bce: list[Tensor] = []
        self.chosen: list[int] = []
        self.gate_means: list[Tensor] = []
        self.everything: TokenSubset | None = None  # the all-tokens subset, made once per forward
        self.work: list[OpWork] = []  # the routers' (flops.py)

    def select(self, r: int, x: Tensor) -> tuple[TokenSubset, Tensor]:
        """Tokens that run recursion r and their gates (in the subset's row order)."""
        B, N, P, D = self.B, self.N, self.P, x.shape[-1]
        k_prev = self.candidates.shape[1]
        if k_prev == self.num_patches:  # all tokens are candidates: score x directly (no gather)
            h = x
        else:
            h = TokenSubset.from_positions(torch.cat([self.prefix, self.candidates], 1), N).gather(x)
            h = h.view(B, P + k_prev, D)  # (B*(P+k), D) -> (B, P+k, D)
        router = self.model.routers[r]
        logits = full_precision(router, h).squeeze(-1)  # (B, P + k_prev), CLS first
        logits = self.model.guard_finite(f'routers.{r} logits', f'recursion {r} (token selection)', logits, router)
        patch_logits = logits[:, P:]
        k = min(k_prev, capacity_tokens(self.capacities[r], self.num_patches))
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
        self.chosen.append(k)  # tokens chosen at each recursion run
        self.work.append(linear_work(f'routers.{r}', P + k_prev, D, 1))
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
    """One forward's token-choice routing state (SPEC §4): a depth per token, chosen up front."""

    def __init__(self, model: MoRViT, x: Tensor) -> None:
        B, N, _ = x.shape
        self.model, self.B, self.N, self.P = model, B, N, model.num_prefix_tokens
        self.plan: DepthPlan | None = None
        self.recursions = torch.zeros(B, N - self.P, dtype=torch.long, device=x.device)  # patch tokens
        self.work: list[OpWork] = []

    def select(self, r: int, x: Tensor) -> tuple[TokenSubset, Tensor]:
        model, P, R = self.model, self.P, self.model.num_recursions
        if self.plan is None:  # recursion 0: every token's depth, from the states entering it
            self.logits = model.guard_finite('router logits', 'the depth assignment (before recursion 0)',
                                             full_precision(model.router, x), model.router)  # (B, N, N_r)
            probs = self.logits.softmax(-1)
            self.probs = probs[:, P:]
            self.recursions = self.logits[:, P:].detach().argmax(-1) + 1  # (B, Np) in 1..N_r
            depth = torch.cat([self.recursions.new_full((self.B, P), R), self.recursions], 1)  # CLS: every one
            gate = model.alpha * probs.gather(-1, (depth - 1).unsqueeze(-1))  # (B, N, 1)
            self.gate = gate.reshape(-1).to(x.dtype)
            self.plan = DepthPlan(depth, R)
            self.work.append(linear_work('router', self.N, x.shape[-1], R))
        active = self.plan.active(r)
        return active, self.gate.index_select(0, active.index)

    def finish(self) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        if self.plan is None:
            return {}, {}
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


class MoRViT(ViTBackbone):
    """MoR-ViT (SPEC §4): first block, a shared unit cycled N_r times with token routing, last block.

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' (aliases 'ti', 's', 'b', 'l'); `embed_dim`, `num_heads` override
            the table. The depth is L = 2 + unit_size * num_recursions application steps.
        num_recursions: N_r, recursions of the shared unit, >= 1 (default: as deep as `arch`,
            (depth - 2) // unit_size: 10 for 12 applications, 22 for L/16).
        unit_size: blocks in the shared unit (default 1), >= 1.
        routing: 'expert_choice' (default) or 'token_choice' (see the module docstring).
        capacities: expert-choice only: N_r fractions in (0, 1], non-increasing, of the patch tokens
            that run each recursion. None: (N_r - r)/N_r. An inference-time knob (plain attribute,
            e.g. `--cfg-options model.backbone.capacities=[...]`); (1.0,) * N_r is the same model
            at full depth. Token-choice takes None (its depths come from the router).
        compute: the test-time knob through scaled capacities (expert-choice): every capacity in
            force times j / Np, j in 1..Np (Np patch tokens), j the largest whose FLOPs are <=
            compute x those of full capacities (every token through every recursion), rounded
            down, at least j = 1; fractions above what the capacities in force cost give them
            unchanged. Token-choice routing takes compute=None (its depths come from its router).
        router_alpha: gate scale alpha > 0. None: 0.1 for expert-choice (SPEC), 1.0 for
            token-choice (decision).
        bce_loss_weight: expert-choice router BCE loss weight (SPEC: 1e-3).
        balance_loss_weight: token-choice balance loss weight (SPEC: 0.1).
        z_loss_weight: token-choice router z-loss weight (SPEC: 1e-5).
        out_indices: 0-based application steps whose states are returned (default: ends of 4
            equal stages, (2, 5, 8, 11) for L = 12); tokens not chosen keep their state.
        timm_init: 'average' (MoR: the shared unit <- mean of the tied layers) or 'pick'
            (<- block `shared_init_block + j`), SPEC §6.
        shared_init_block: first timm block of the shared unit for `timm_init='pick'` (default 6).
        update: the gated update of a chosen token (SPEC §4 decision, an ablation switch):
            'interpolate' (default) `h <- h + g (Block(h) - h)`, so g = 1 applies the whole block;
            'additive' `h <- h + g Block(h)`, as MoR's code.
        timm_gates: the routers' start when a timm/DeiT checkpoint is loaded (our decision for a
            start that MoR, trained from scratch, does not have): 'open' (default) sets the router
            biases so every gate starts at `OPEN_GATE` = 0.99 (token choice: every token at the
            deepest depth); with `router_alpha=1.0` and full capacities a recursion then applies
            (nearly) the whole block, DeiT's update. 'fresh' keeps the from-scratch init. The
            from-scratch default alpha = 0.1 (SPEC §4, MoR's recipe) caps every gate at 0.1, so the
            COCO/ADE recipes, which start from DeiT, set `router_alpha=1.0`.
        Other arguments: see `ViTBackbone`.

    Parameters: `blocks.0` first, `blocks.1..u` shared unit, `blocks.{u+1}` last (timm block names);
    `routers.r` (Linear D->1, one per recursion, expert-choice) or `router` (Linear D->N_r,
    token-choice). `schedule[s]` = block index of application step s; `recursion_of_step[s]` = the
    recursion step s belongs to (None for the first and last block).

    Statistics (`self.stats`): `aux_losses` (weighted) `loss_router_bce` (expert-choice, training mode only) or
    `loss_balance` and `loss_z` (token-choice); `scalars` `sel/r{r}` (fraction of patch tokens
    running recursion r), `recursions/mean` (mean recursions per patch token), `gate/mean`;
    `token_maps['recursions']` (B, h, w) int64 recursions per patch token; `work`: the routers and every block
    application with the tokens really processed.
    """

    def __init__(self, arch: str = 'small', embed_dim: int | None = None, num_heads: int | None = None,
                 num_recursions: int | None = None, unit_size: int = 1, routing: str = 'expert_choice',
                 capacities: Sequence[float] | None = None, router_alpha: float | None = None,
                 bce_loss_weight: float = 1e-3, balance_loss_weight: float = 0.1, z_loss_weight: float = 1e-5,
                 update: str = 'interpolate', out_indices: Sequence[int] | None = None, timm_init: str = 'average',
                 shared_init_block: int = 6, timm_gates: str = 'open', **kwargs: Any) -> None:
        check_renamed('MoRViT', kwargs, {'depth': 'num_recursions (the depth is 2 + unit_size * num_recursions '
                                                  'block applications)'})
        sizes = resolve_arch(arch, ARCH_SETTINGS, embed_dim=embed_dim, num_heads=num_heads)
        u = check_int('unit_size', unit_size, 1)
        if num_recursions is None:  # as deep as the arch: 2 + unit_size * N_r = its depth
            num_recursions = max(1, (sizes['depth'] - 2) // u)
        R = check_int('num_recursions (N_r)', num_recursions, 1)
        depth = 2 + u * R
        super().__init__(embed_dim=sizes['embed_dim'], num_heads=sizes['num_heads'], depth=depth, **kwargs)
        self.num_recursions, self.unit_size = R, u
        self.routing = check_choice('routing', routing, ROUTINGS)
        if router_alpha is None:
            router_alpha = DEFAULT_ALPHA[routing]
        self.alpha = check_float('router_alpha', router_alpha, 0.0, math.inf, low_open=True)
        self.bce_loss_weight = check_float('bce_loss_weight', bce_loss_weight, 0.0, math.inf)
        self.balance_loss_weight = check_float('balance_loss_weight', balance_loss_weight, 0.0, math.inf)
        self.z_loss_weight = check_float('z_loss_weight', z_loss_weight, 0.0, math.inf)
        self.out_indices = check_out_indices(stage_ends(depth) if out_indices is None else out_indices, depth)
        self.timm_init = check_choice('timm_init', timm_init, TIMM_INITS)
        self.shared_init_block = check_int('shared_init_block', shared_init_block, 0)
        self.update = check_choice('update', update, UPDATES)
        self.timm_gates = check_choice('timm_gates', timm_gates, ['open', 'fresh'])
        self.capacities = capacities
        self.check_knobs()

        # The parameters: first block, the shared unit, last block; the schedule says which runs when.
        self.blocks = nn.ModuleList(self.make_block() for _ in range(u + 2))
        self.schedule = [0] + [1 + j for _ in range(R) for j in range(u)] + [u + 1]
        self.recursion_of_step: list[int | None] = [None] + [r for r in range(R) for _ in range(u)] + [None]
        if routing == 'expert_choice':
            self.routers = nn.ModuleList(_make_router(self.embed_dim, 1) for _ in range(R))
        else:
            self.router = _make_router(self.embed_dim, R)

    # ---- knobs ---------------------------------------------------------------------------------
    def check_knobs(self) -> None:
        """Validate `capacities` (at construction and at every forward: a plain attribute)."""
        caps, R = self.capacities, self.num_recursions
        if self.routing == 'token_choice':
            if self.compute is not None:
                raise ValueError("compute acts on MoR-ViT through the capacities of routing='expert_choice'; "
                                 f"routing='token_choice' takes compute=None, got compute={self.compute!r}")
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

    # ---- the compute knob ---------------------------------------------------------------------
    def expert_choice_work(self, capacities: Sequence[float], tokens: int) -> list:
        """What an expert-choice forward computes per image with `capacities` on `tokens` tokens
        (all steps, in execution order: the same entries `forward_states` records)."""
        P, D, u = self.num_prefix_tokens, self.embed_dim, self.unit_size
        num_patches = tokens - P
        work, k_prev = [self.step_work(0, tokens)], num_patches
        for r, cap in enumerate(capacities):
            k = min(k_prev, capacity_tokens(cap, num_patches))
            work.append(linear_work(f'routers.{r}', P + k_prev, D, 1))
            active = TokenSubset(None, (P + k,), tokens)  # only the counts matter for the work
            work += [subset_work(self.blocks[self.schedule[s]], active, cached_keys=False, windows=self.window_for(s))
                     for s in range(1 + r * u, 1 + (r + 1) * u)]
            k_prev = k
        return [*work, self.step_work(self.depth - 1, tokens)]

    def compute_setting(self, fraction: float, grid: tuple[int, int]) -> dict[str, Any]:
        """`compute` -> the capacities of one forward (the class docstring's scaling)."""
        self.check_knobs()  # token-choice: an error naming compute
        num_patches = grid[0] * grid[1]
        tokens, caps = num_patches + self.num_prefix_tokens, self.capacity_schedule
        embed = conv_work('patch_embed', self.patch_embed.proj, grid).flops

        def scaled(i: int) -> tuple[float, ...]:
            return tuple(c * ((i + 1) / num_patches) for c in caps)

        def flops(capacities: Sequence[float]) -> float:
            return embed + total_flops(self.expert_choice_work(capacities, tokens))

        full = flops((1.0,) * self.num_recursions)
        i = largest_within(fraction, full, lambda i: flops(scaled(i)), num_patches)
        return {} if i == num_patches - 1 else {'capacities': scaled(i)}

    # ---- forward ------------------------------------------------------------------------------
    def forward_states(self, x: Tensor, indices: Sequence[int]) -> list[Tensor]:
        """States (B, N, D) after the requested steps; sets `self.stats` (see the class docstring)."""
        self.check_knobs()
        wanted = {i: None for i in indices}
        num_steps = max(indices) + 1
        routing = (ExpertChoice if self.routing == 'expert_choice' else TokenChoice)(self, x)
        inplace = not torch.is_grad_enabled()  # inference: update rows in place, clone what is kept
        steps, selection = routing.work, None  # the routers record their work as they run
        for s in range(num_steps):
            block, r = self.blocks[self.schedule[s]], self.recursion_of_step[s]
            if r is None:  # first / last block: every token
                x = self.run_block(block, x, s)
                steps.append(self.step_work(s, x.shape[1]))
            else:
                if self.recursion_of_step[s - 1] != r:  # the first application of recursion r
                    selection = routing.select(r, x)
                active, gate = selection
                x = self.run_gated(block, x, active, gate, s, inplace and not active.is_full)
                steps.append(subset_work(block, active, cached_keys=False, windows=self.window_for(s)))
            if s in wanted:
                wanted[s] = x.clone() if inplace and s < num_steps - 1 else x
        losses, scalars = routing.finish()
        self.stats = ForwardStats(work=steps, aux_losses=losses, scalars=scalars,
                                  token_maps={'recursions': routing.recursions})
        return [wanted[i] for i in indices]

    def run_gated(self, block: nn.Module, x: Tensor, active: TokenSubset, gate: Tensor, step: int,
                  inplace: bool = False) -> Tensor:
        """The gated update (`update`) for the `active` tokens, attention among them (step `step`'s
        drop-path rate; checkpointed like `run_block` when asked)."""
        rate, windows = self.drop_path_rates[step], self.window_for(step)
        if self.with_cp and self.training and torch.is_grad_enabled():
            return checkpoint(_gated_states, block, x, active, gate, self.update, rate, windows, use_reentrant=False)
        return run_subset(block, x, active, gate=gate, update=self.update, drop_path_rate=rate, inplace=inplace,
                          windows=windows)[0]

    # ---- weights ------------------------------------------------------------------------------
    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """first <- timm block 0, last <- the last block, shared unit <- the mean of the tied middle
        layers or a picked block (`timm_init`, SPEC §6); the routers start as `timm_gates` says."""
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
