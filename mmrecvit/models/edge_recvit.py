"""Edge-RecViT: token-adaptive depth over a head / shared / tail block stack (SPEC §3).

    image -> patch embedding -> EARR ranker: depth d_i per patch token (CLS: full depth)
          -> step 0: head block, steps 1..L-2: one shared block, step L-1: tail block;
             a token of depth d runs steps 0..d-1, then its state is frozen
          -> states after the requested steps (exited tokens contribute their frozen state)

Two executions of the same function (attribute `execution`):

* 'masked' -- the reference, as in the authors' code: every token runs every step and the
  still-active gate keeps exited tokens frozen, `h <- h + a_s * (Block_s(h) - h)` with
  `a_s = 1 - cumsum(y)_s + y_s` for the one-hot depth choice y. Training always runs this path,
  because the Gumbel-softmax straight-through gradient reaches the ranker through a_s.
* 'adaptive' (default in eval) -- the token-adaptive engine (`token_adaptive.py`): queries, norms
  and MLP run only for the active tokens; exited tokens stay keys/values, projected once per weight
  set (once for the shared block, once more for the tail) and reused while the shared block
  repeats. Same outputs as 'masked' (tested to 1e-5) at the cost of the tokens really processed;
  with every token at full depth it is the plain dense forward.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from torch import Tensor, nn

from .checkpoint import fresh_parameters, pick_or_average_blocks, split_timm_blocks
from .checks import check_bool, check_choice, check_float, check_int
from .compute import largest_within
from .flops import conv_work, linear_work, total_flops
from .stats import ForwardStats
from .token_adaptive import DepthPlan, KVCache, TokenSubset, run_subset, subset_work
from .vit import ARCH_SETTINGS, ViTBackbone, check_out_indices, full_precision, resolve_arch, stage_ends

EXECUTIONS = ('adaptive', 'masked')
HEAD, SHARED, TAIL = 0, 1, 2  # indices into `blocks`


def still_active_gates(y: Tensor) -> Tensor:
    """(..., L) one-hot depth choice y (straight-through allowed) -> gates a (..., L) (SPEC §3).

    `a_s = 1 - cumsum(y)_s + y_s`: 1 for steps s <= d-1 (the token still runs), 0 afterwards.
    """
    return 1.0 - y.cumsum(-1) + y


class EarrRanker(nn.Module):
    """EARR, the edge-aware recursion ranker: Linear(D->2D) -> GELU -> Linear(2D->L), no biases.

    Gives depth logits z (B, Np, L) per patch token. Initialised like timm's linears (truncated
    normal, std 0.02; decision: a zero init would give every token depth 1).
    """

    def __init__(self, dim: int, depth: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * dim, bias=False)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(2 * dim, depth, bias=False)
        for fc in (self.fc1, self.fc2):
            trunc_normal_(fc.weight, std=0.02)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class EdgeRecViT(ViTBackbone):
    """Edge-RecViT (SPEC §3): head block, one shared block up to L-2 times, tail block.

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' (aliases 'ti', 's', 'b', 'l'); `embed_dim`, `depth` (L, the
            number of block applications, >= 3) and `num_heads` override the table.
        out_indices: 0-based steps whose states are returned (default: after steps 3/6/9/12 of 12,
            i.e. (2, 5, 8, 11)); tokens that exited earlier contribute their frozen state.
        shared_init_block: timm/DeiT block that initialises the shared block (SPEC §6, the
            authors' code: 6 of 12); None: the checkpoint's middle block n // 2. The head takes
            block 0, the tail the checkpoint's last block, `norm` the checkpoint's final norm.
        stb_loss_weight: weight of the STB z-loss `mean_i (logsumexp_l z_il)^2` (SPEC: 1e-3).
        du_loss_weight: weight of the DU balance loss `L sum_l E_l A_l` (SPEC: 0.1). Dense tasks use
            STB + DU only (decision: CCE needs classification logits).
        gumbel_tau: temperature of the training-time Gumbel-softmax (decision: 1.0). A plain
            attribute: `mmrecvit.mm.hooks.TemperatureScheduleHook` anneals it during training.
        max_depth: inference knob, no retraining: cap every depth at this many steps (CLS too,
            see below). None: L.
        depth_shift: inference knob: add this to every patch token's depth (clipped to
            [1, max_depth]); negative values save compute, positive ones spend more.
        final_norm: timm's final LayerNorm `norm` on the state after the last step L-1 (as in
            the authors' model, whose tail output goes through it; decision: the other levels stay
            un-normalised, as mmseg's ViT `final_norm`). It is part of the paper's parameter
            counts (Ti 1.599M, S 6.000M, B 23.206M). From a timm/DeiT checkpoint it takes DeiT's
            final norm (the authors' model keeps it), so the tail's output is normalised as DeiT's
            last block output is.
        frozen_kv: exited tokens stay in the sequence as keys/values with their frozen state
            (True, SPEC §3 decision, the authors' code); False (ablation): attention at step s
            runs among the tokens still active at s only.
        tail_on_all: dense-prediction option (our decision, off by default = the paper): every
            token runs the tail block (step L-1) on its frozen state, so the last map of a token
            that exited early is tail(head...) features rather than head-only ones; the ranker's
            depths still decide the shared steps.
        execution: 'adaptive' (token-adaptive engine in eval) or 'masked' (the authors' reference:
            all tokens through all steps, exited ones frozen by the gate). Training always uses
            'masked' (the gate carries the ranker's gradient). A plain attribute: may be switched
            on a built model.
        compute: the test-time knob through a shifted depth assignment: after the ranker (and
            `depth_shift` / `max_depth`), every patch token's depth of an image is shifted by the
            same k in -(L-1)..0 (clipped to [1, max depth]), k the largest whose FLOPs (the
            'adaptive' execution's: `adaptive_work`) are <= compute x the full-depth FLOPs (every
            token through all L steps), rounded down, at least k = -(L-1) (every token at depth 1).
            Chosen per image, so a result does not depend on the batch it ran in; the ranker's
            order of tokens is kept. Fractions above what the ranker's depths cost give them
            unchanged. With execution='masked' the same depths run, but every token is computed.
        Other arguments: see `ViTBackbone`.

    Decisions: the ranker reads the patch tokens after the position embedding; CLS runs the
    deepest allowed depth (L, or `max_depth` when capped: steps past the last patch token's only
    change CLS, which the dense maps do not contain); the knobs apply in training and eval alike
    (the straight-through gradient then uses the adjusted one-hot); DU's A_l counts the ranker's
    argmax depths d_i = argmax p_i + 1 as in the paper, the depths eval runs (SPEC §3's 1[d_i = l];
    not the Gumbel-sampled training depths, which would make training and test disagree); the aux
    losses are computed in eval too (cheap; tools can read them).

    Batch padding (decision, measured): the zero tokens mmdet pads a batch with count in DU's E_l and
    A_l and run their own ranker depths (the paper's rule; the pad extent is not excluded). The ranker
    decides each token alone, so padding changes a real token's depth only through the position
    embedding resampled to the padded grid. `tools/analysis_tools/padding_effect.py` on the toy Mask
    R-CNN (300 iterations, 8 val images, a 256x160 image padded to 256x256, 37.5 % padding): real
    tokens' mean depth 3.351 alone vs 3.345 padded (3.2 % of them change depth), loss_du 0.1015 vs
    0.0993 (-2 %); the padding tokens themselves get depth 5.66 of 6, so in the 'adaptive' execution
    they cost more than the real tokens (3.35) of a padded batch, and `compute` budgets include them.

    Parameters: `blocks.0` head, `blocks.1` shared, `blocks.2` tail (timm block names),
    `ranker.fc1`, `ranker.fc2`, `norm`; schedule `self.schedule[s]` = block index of application step s.

    Statistics (`self.stats`): `aux_losses` `loss_stb`, `loss_du` (weighted); `scalars`
    `depth/mean` (patch tokens), `depth/d{l}` (fraction of patch tokens with depth l, the
    histogram of the depths run: Gumbel-sampled in training), `depth/argmax_mean` and
    `depth/argmax_d{l}` (the same for the argmax depths eval would run), `depth/conf` (mean
    ranker confidence); `token_maps` `depth` (B, h, w) int64 and
    `confidence` (B, h, w); `work`: the ranker and every executed block application with the tokens really processed.
    """

    def __init__(self, arch: str = 'small', embed_dim: int | None = None, depth: int | None = None,
                 num_heads: int | None = None, out_indices: Sequence[int] | None = None,
                 shared_init_block: int | None = None, stb_loss_weight: float = 1e-3, du_loss_weight: float = 0.1,
                 gumbel_tau: float = 1.0, max_depth: int | None = None, depth_shift: int = 0,
                 execution: str = 'adaptive', final_norm: bool = True, frozen_kv: bool = True,
                 tail_on_all: bool = False, **kwargs: Any) -> None:
        sizes = resolve_arch(arch, ARCH_SETTINGS, embed_dim=embed_dim, depth=depth, num_heads=num_heads)
        depth = check_int('depth (head + shared steps + tail, so at least 3)', sizes['depth'], 3)
        super().__init__(embed_dim=sizes['embed_dim'], num_heads=sizes['num_heads'], depth=depth,
                         final_norm=final_norm, **kwargs)
        self.out_indices = check_out_indices(stage_ends(depth) if out_indices is None else out_indices, depth)
        if shared_init_block is not None:
            check_int('shared_init_block', shared_init_block, 0)
        self.shared_init_block = shared_init_block
        self.frozen_kv = check_bool('frozen_kv', frozen_kv)
        self.tail_on_all = check_bool('tail_on_all', tail_on_all)
        self.stb_loss_weight = check_float('stb_loss_weight', stb_loss_weight, 0.0, math.inf)
        self.du_loss_weight = check_float('du_loss_weight', du_loss_weight, 0.0, math.inf)
        self.gumbel_tau = check_float('gumbel_tau', gumbel_tau, 0.0, math.inf, low_open=True)
        self.max_depth, self.depth_shift, self.execution = max_depth, depth_shift, execution
        self.check_knobs()

        # The parameters: three unique blocks and the ranker; the schedule says which block runs when.
        self.blocks = nn.ModuleList(self.make_block() for _ in (HEAD, SHARED, TAIL))
        self.schedule = [HEAD] + [SHARED] * (depth - 2) + [TAIL]
        self.ranker = EarrRanker(self.embed_dim, depth)

    # ---- depth assignment ---------------------------------------------------------------------
    def check_knobs(self) -> None:
        """Validate the inference knobs (at construction and at every forward: they are plain
        attributes a user may set on a built model)."""
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
        """Ranker depths (B, Np) in 1..L -> executed depths after the shift/cap knobs.

        The one place a depth assignment is made: the benchmark harness overrides it on an
        instance to run fixed depth patterns (`mmrecvit.benchmark`).
        """
        return (chosen + self.depth_shift).clamp(1, self.cls_depth)

    # ---- the compute knob ---------------------------------------------------------------------
    def compute_setting(self, fraction: float, grid: tuple[int, int]) -> dict[str, Any]:
        """Nothing to set up front: the depths are shifted per image once the ranker has run
        (`depths_within`, called by `forward_states` while `compute` is in force)."""
        return {}

    def adaptive_work(self, alive: Sequence[int], tokens: int) -> list:
        """What `_forward_adaptive` computes for one image of `tokens` tokens whose step s runs
        `alive[s]` of them (the same entries, from the counts alone; `frozen_kv`'s cache included)."""
        work, owner, before = [], None, tokens
        for s, n in enumerate(alive):
            block, windows = self.blocks[self.schedule[s]], self.window_for(s)
            active = tokens if self.tail_on_all and s == self.depth - 1 else n
            cached, new = self.frozen_kv and 0 < active < tokens, 0
            if cached:  # as KVCache.update: what froze since the last step, or all frozen for a new weight set
                new, owner = (before - active) if owner is block else (tokens - active), block
            step = subset_work(block, TokenSubset(None, (active,), tokens), cached_keys=cached, windows=windows)
            work.append(dataclasses.replace(step, new_kv=float(new)))
            before = n
        return work

    def depths_within(self, depth: Tensor, fraction: float) -> Tensor:
        """Patch-token depths (B, Np) -> the same shifted per image to fit `fraction` (class docstring)."""
        L, P = self.depth, self.num_prefix_tokens
        tokens = depth.shape[1] + P
        shifts = torch.arange(1 - L, 1, device=depth.device)  # the smallest setting first
        candidates = (depth.unsqueeze(0) + shifts.view(-1, 1, 1)).clamp(1, self.cls_depth)  # (S, B, Np)
        steps = torch.arange(L, device=depth.device)
        alive = ((candidates.unsqueeze(-1) > steps).sum(2) + P * (self.cls_depth > steps)).tolist()  # (S, B, L)
        ranker = [linear_work('', depth.shape[1], fc.in_features, fc.out_features)
                  for fc in (self.ranker.fc1, self.ranker.fc2)]
        fixed = total_flops([conv_work('patch_embed', self.patch_embed.proj, self._grid), *ranker])  # any depths

        def flops(counts: Sequence[int]) -> float:
            return fixed + total_flops(self.adaptive_work(counts, tokens))

        full = flops([tokens] * L)
        chosen = [largest_within(fraction, full, lambda i, b=b: flops(alive[i][b]), len(shifts))
                  for b in range(depth.shape[0])]
        if min(chosen) == len(shifts) - 1:
            return depth
        return candidates[torch.tensor(chosen, device=depth.device), torch.arange(depth.shape[0], device=depth.device)]

    # ---- forward ------------------------------------------------------------------------------
    def forward_states(self, x: Tensor, indices: Sequence[int]) -> list[Tensor]:
        """States (B, N, D) after the requested steps; sets `self.stats` (see the class docstring)."""
        self.check_knobs()
        B, N, _ = x.shape
        P, L = self.num_prefix_tokens, self.depth
        logits = self.guard_finite('ranker logits', 'the depth assignment (before step 0)',
                                   full_precision(self.ranker, x[:, P:]), self.ranker)
        probs = logits.softmax(-1)  # fp32, as the logits and the Gumbel noise (see full_precision)
        confidence, choice = probs.detach().max(-1)
        eval_depth = self.assign_depths(choice + 1)  # (B, Np) int64 in 1..L: what eval runs
        if self._compute_in_force is not None and not self.training:
            eval_depth = self.depths_within(eval_depth, self._compute_in_force)
        depth = eval_depth
        if self.training:
            # Gumbel-softmax straight-through: the forward uses the sampled one-hot.
            gumbels = -torch.empty_like(logits).exponential_().log()
            y_soft = ((logits + gumbels) / self.gumbel_tau).softmax(-1)
            depth = self.assign_depths(y_soft.detach().argmax(-1) + 1)

        prefix_depth = depth.new_full((B, P), self.cls_depth)
        if self.training or self.execution == 'masked':
            y = F.one_hot(torch.cat([prefix_depth, depth], 1) - 1, L).to(x.dtype)  # (B, N, L)
            if self.training:
                y = y + F.pad(y_soft - y_soft.detach(), (0, 0, P, 0))  # straight-through for patch tokens
            gates = still_active_gates(y)
            if self.tail_on_all:
                gates = torch.cat([gates[..., :-1], torch.ones_like(gates[..., -1:])], -1)
            states, steps = self._forward_masked(x, gates, indices)
        else:
            states, steps = self._forward_adaptive(x, torch.cat([prefix_depth, depth], 1), indices)

        ranker = [linear_work(f'ranker.{name}', N - P, fc.in_features, fc.out_features)
                  for name, fc in (('fc1', self.ranker.fc1), ('fc2', self.ranker.fc2))]
        scalars = self._scalars(depth, 'depth/')
        scalars.update(self._scalars(eval_depth, 'depth/argmax_'))
        scalars['depth/conf'] = confidence.mean()
        self.stats = ForwardStats(work=[*ranker, *steps], aux_losses=self._aux_losses(logits, probs, eval_depth),
                                  scalars=scalars, token_maps={'depth': depth, 'confidence': confidence})
        return states

    def _forward_masked(self, x: Tensor, gates: Tensor, indices: Sequence[int]) -> tuple[list[Tensor], list]:
        """The reference: every token through every step, `h <- h + a_s (Block_s(h) - h)`; without
        `frozen_kv` the keys are the tokens still active at s."""
        wanted = {i: None for i in indices}
        num_steps = max(indices) + 1
        for s in range(num_steps):
            a = gates[..., s: s + 1]  # (B, N, 1)
            kwargs = {}
            if not self.frozen_kv:
                keys = a[..., 0].detach() > 0.5  # (B, N) the active tokens
                keys = keys | ~keys.any(1, keepdim=True)  # an image with none attends to all (outputs unused)
                kwargs['attn_mask'] = keys[:, None, None, :]  # (B, 1, 1, N): the same keys for every query
            x = x + a * (self.run_block(self.blocks[self.schedule[s]], x, s, **kwargs) - x)
            if s in wanted:
                wanted[s] = x
        return [wanted[i] for i in indices], self.dense_stats(x.shape[1], num_steps).work

    def _forward_adaptive(self, x: Tensor, depth: Tensor, indices: Sequence[int]) -> tuple[list[Tensor], list]:
        """The engine: step s runs only tokens with depth > s; frozen keys/values are cached."""
        wanted = {i: None for i in indices}
        num_steps = max(indices) + 1
        plan, cache, steps = DepthPlan(depth, num_steps), KVCache(), []
        inplace = not torch.is_grad_enabled()  # inference: update the rows in place, clone what is kept
        B, N, _ = x.shape
        for s in range(num_steps):
            block, active = self.blocks[self.schedule[s]], plan.active(s)
            if self.tail_on_all and s == self.depth - 1:
                active = TokenSubset.everything(B, N, x.device)
            common = dict(drop_path_rate=self.drop_path_rates[s], windows=self.window_for(s))
            if active.is_full:  # no token has exited yet: the plain block, no key/value cache to fill
                x, work = run_subset(block, x, active, **common)
            elif not self.frozen_kv:  # attention among the active tokens (empty images do nothing)
                x, work = run_subset(block, x, active, inplace=inplace, **common)
            elif active.total:
                new = cache.update(block, x, plan.exited(s), plan.frozen(s))
                x, work = run_subset(block, x, active, kv_cache=cache, inplace=inplace, **common)
                work = dataclasses.replace(work, new_kv=new.total / x.shape[0])
            else:
                work = subset_work(block, active, cached_keys=True, windows=common['windows'])
            steps.append(work)
            if s in wanted:
                wanted[s] = x.clone() if inplace and s < num_steps - 1 else x
        return [wanted[i] for i in indices], steps

    # ---- statistics ---------------------------------------------------------------------------
    def _aux_losses(self, logits: Tensor, probs: Tensor, depth: Tensor) -> dict[str, Tensor]:
        """STB z-loss and DU balance loss over the patch tokens of the batch, weighted; `depth`:
        the argmax depths (A_l, SPEC §3)."""
        stb = torch.logsumexp(logits, -1).square().mean()
        expected = probs.mean((0, 1))  # E_l
        actual = F.one_hot(depth - 1, self.depth).to(probs.dtype).mean((0, 1))  # A_l
        du = self.depth * (expected * actual).sum()
        return {'loss_stb': self.stb_loss_weight * stb, 'loss_du': self.du_loss_weight * du}

    def _scalars(self, depth: Tensor, prefix: str) -> dict[str, Tensor]:
        """Mean depth and the depth histogram (fraction of patch tokens per depth), named `prefix`*."""
        hist = F.one_hot(depth.flatten() - 1, self.depth).float().mean(0)  # static shape: traceable, exportable
        scalars = {f'{prefix}mean': depth.float().mean()}
        scalars.update({f'{prefix}d{level}': f for level, f in enumerate(hist.unbind(), start=1)})
        return scalars

    # ---- weights ------------------------------------------------------------------------------
    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """head <- timm block 0, shared <- block `shared_init_block` (default the middle one), tail
        <- the last block (SPEC §6), `norm` <- the checkpoint's final norm; the ranker keeps its
        initialisation (logged), as does `norm` for a checkpoint without one."""
        rest, blocks = split_timm_blocks(state_dict)
        if not blocks:
            raise ValueError('the timm checkpoint has no blocks.<i>.* keys to initialise Edge-RecViT from')
        n = len(blocks)
        shared = n // 2 if self.shared_init_block is None else self.shared_init_block
        if shared >= n:
            raise ValueError(f'shared_init_block={shared} is not a block of this {n}-block checkpoint; '
                             f'allowed: 0..{n - 1}')
        rest.update(pick_or_average_blocks(blocks, [[0], [shared], [n - 1]], 'pick', prefix='blocks'))
        return fresh_parameters(self, rest, r'^(ranker|norm)\.')
