"""SR-ViT: SoftMoR's per-token soft mixture over recursions (SPEC §1).

A DeiT's blocks are grouped into recursion units of consecutive blocks, coarse to fine. Unit u
(block stack f_u, input x) runs T_u recursions and reads its trajectory out per token:

    h_1 = f_u(x),   h_t = f_u(S_{u,t}(h_{t-1}))  for t = 2..T_u       S_{u,t}(h) = h + Linear_{u,t}(h)
    w = softmax(R_u(x))  (per token, over recursions),   y_u = sum_t w_t * h_t

and y_u is the next unit's input and the u-th multi-level feature (SPEC §5).

Unique blocks and applications are separate things (STYLE 3): `blocks.{i}` are the parameters
(timm names, block i <- DeiT block i, SPEC §6) and `schedule[t]` is the block of application step
t, unit after unit and recursion after recursion (`depth` = sum_u unit_sizes[u] * T_u steps).
Drop-path rates and activation checkpointing are indexed by application step.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .checkpoint import fresh_parameters, split_timm_blocks
from .checks import check_choice, check_int, check_renamed, check_sequence
from .compute import largest_within
from .flops import conv_work, linear_work, total_flops
from .stats import ForwardStats
from .vit import ARCH_SETTINGS, ViTBackbone, check_out_indices, full_precision, resolve_arch

READOUTS = ('soft', 'final', 'hard')
ROUTER_INPUTS = ('unit_input', 'recursion_states')


class StepTransform(nn.Module):
    """S_{u,t}(h) = h + Linear(h), D x D with bias, zero-initialised (SPEC §1 decision): the
    identity at initialisation, so a DeiT-initialised model repeats DeiT's unit trajectory."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, h: Tensor) -> Tensor:
        return h + self.proj(h)


class StepShift(nn.Module):
    """S_{u,t}(h) = h + b, a learned per-channel shift, zero-initialised: the cheap ablation of the
    step transform (D parameters instead of D^2 + D)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, h: Tensor) -> Tensor:
        return h + self.bias


# The step transform's kinds (SPEC §1 ablation): what runs before recursions t >= 2.
STEP_TRANSFORMS = {'linear': StepTransform, 'shift': StepShift, 'none': None}
TIMM_INITS = ('function', 'fresh')
# `timm_init='function'`: the share of recursion 1 in every router's initial mixture.
FIRST_RECURSION_WEIGHT = 0.99


class SoftRouter(nn.Module):
    """R_u: Linear(D -> T) scoring the T recursions of a unit, zero-initialised (uniform mixture).

    `forward(x)` gives the logits of all recursions from one input (the unit input, SPEC §1);
    `recursion_logit(h, t)` scores recursion t from its own state with row t only (the
    'recursion_states' option).
    """

    def __init__(self, dim: int, num_recursions: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, num_recursions)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x)  # (B, N, D) -> (B, N, T)

    def recursion_logit(self, h: Tensor, t: int) -> Tensor:
        """(B, N, D) -> (B, N, 1), in full precision (see `vit.full_precision`)."""
        w, b = self.proj.weight, self.proj.bias
        with torch.autocast(h.device.type, enabled=False):
            return F.linear(h.to(w.dtype), w[t: t + 1], b[t: t + 1])


class RecursionMixture:
    """One unit's readout, accumulated while recursing: it holds O(1) states, never all T (SPEC §1).

    `add(h_t, z_t)` takes each recursion's state (B, N, D) and router logit (B, N, 1) (None: no
    router); `result()` is the unit output. The soft mixture is an online softmax over recursions
    with a running max m (a constant shift, detached: the mixture does not depend on it), normaliser
    s and sum a
    (m = z_1, s = 1, a = h_1 after the first recursion):

        m' = max(m, z_t),  s' = s e^(m - m') + e^(z_t - m'),  a' = a e^(m - m') + e^(z_t - m') h_t,

    so that a / s = sum_t softmax(z)_t h_t. This serves the router logits known up front (unit
    input) and those only known after each recursion (recursion states) alike.

    readout 'soft': a / s.  'final': the last state (router unused).  'hard': the state of the
    per-token argmax recursion (first one on ties, as `torch.argmax`), with the straight-through
    gradient of one-hot(argmax) + w - sg(w): the state receives the gradient of the chosen recursion
    only, the router that of the soft mixture. That is `h_argmax + m_sg - sg(m_sg)` with
    `m_sg = sum_t w_t sg(h_t)`; the added term is exactly zero in the forward pass, and is not
    computed at all when the logits need no gradient (eval).
    """

    def __init__(self, readout: str) -> None:
        self.readout = readout
        self.last: Tensor | None = None  # the latest state ('final') / the argmax state ('hard')
        self.max: Tensor | None = None   # running max of the logits (B, N, 1), detached
        self.norm: Tensor | None = None  # s (B, N, 1)
        self.acc: Tensor | None = None   # a (B, N, D)

    def add(self, h: Tensor, logit: Tensor | None) -> None:
        if self.readout == 'final' or logit is None:
            self.last = h
            return
        z = logit.detach()
        new_max = z if self.max is None else torch.maximum(self.max, z)
        if self.readout == 'hard':
            self.last = h if self.max is None else torch.where(z > self.max, h, self.last)
        # 'hard' needs the soft mixture for its router gradient only: skipped without autograd.
        if self.readout == 'soft' or logit.requires_grad:
            value = h if self.readout == 'soft' else h.detach()
            take = torch.exp(logit - new_max)  # (B, N, 1)
            if self.acc is None:
                self.norm, self.acc = take, take * value
            else:
                keep = torch.exp(self.max - new_max)
                self.norm = self.norm * keep + take
                self.acc = self.acc * keep + take * value
        self.max = new_max

    def result(self) -> Tensor:
        if self.acc is None:  # 'final', a unit without router, or 'hard' without autograd
            return self.last
        mixture = self.acc / self.norm
        if self.readout == 'soft':
            return mixture
        return self.last + (mixture - mixture.detach())


def _per_unit(name: str, value: Any, num_units: int, low: int, high: Sequence[int] | None = None) -> tuple[int, ...]:
    """An int for every unit, or one int per unit, each in [low, high[u]]."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value] * num_units
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f'{name} must be an int or a list of {num_units} ints (one per unit), '
                        f'got {type(value).__name__} {value!r}')
    values = list(value)
    if len(values) != num_units:
        raise ValueError(f'{name} must be an int or a list of {num_units} ints (one per unit), got {value!r}')
    return tuple(check_int(f'{name}[{u}]', v, low, None if high is None else high[u]) for u, v in enumerate(values))


class SRViT(ViTBackbone):
    """SR-ViT (SoftMoR, SPEC §1) as a dense-prediction backbone (SPEC §5).

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' (aliases 'ti', 's', 'b', 'l'); `embed_dim`, `num_blocks` and
            `num_heads` override the table (the table's 12 layers are SR-ViT's unique blocks).
        num_blocks: the unique blocks (DeiT's layers), default from `arch`.
        unit_sizes: blocks per recursion unit, consecutive and coarse to fine; must sum to
            `num_blocks`. Default (SPEC §1 decision): [4, 4, 2, 2] for 12 blocks, and the same
            proportions [n/3, n/3, n/6, n/6] for any n divisible by 6 (our decision); otherwise required.
        num_recursions: T, the recursions of every unit (int) or of each unit (list). Default 4.
            T = 1 is DeiT exactly (no step transforms, no routers). The model's `depth` (block
            applications) is sum_u unit_sizes[u] * T_u, 48 for S with T = 4.
        eval_recursions: T' <= T, the recursions each unit runs in eval mode (int or per-unit list;
            default T). A test-time knob: the router logits of the first T' recursions are kept and
            the softmax taken over them (renormalised); the parameters, hence the checkpoint keys,
            depend on T only, so a model trained with T loads strictly and runs with any T'.
            Training always runs T. Can be changed after construction (`model.eval_recursions = 2`).
        compute: the test-time knob through `eval_recursions`: from the current T'_u, one recursion at
            a time is taken from the unit that has the most left (the finer, later unit on ties),
            down to 1 per unit, e.g. [4, 4, 2, 2] -> [4, 3, 2, 2] -> [3, 3, 2, 2] -> ... -> [1, 1, 1, 1];
            the largest of these settings whose FLOPs are <= compute x those of the full T schedule
            runs (rounded down; at least [1, ..., 1]). Outputs stay the unit outputs.
        readout: 'soft' (default): the per-token softmax mixture over recursions. 'final': the last
            state only (naive recursion, the paper's ablation); builds no routers, so its
            checkpoint has no router keys (our decision: no unused parameters in training).
            'hard': the per-token argmax recursion, straight-through gradient (see `RecursionMixture`);
            with the zero-initialised router all recursions tie and the first is chosen until it learns.
        router_input: what the Soft Router reads (SPEC §1 decision: 'unit_input').
            'unit_input': logits z = R_u(x) from the unit input x, for all recursions at once.
            'recursion_states': the logit of recursion t is row t of the same Linear applied to that
            recursion's state, z_t = W_u[t] . h_t + b_u[t]; the softmax over recursions is the same.
            Same keys and shapes in both cases, so the choice is a forward-time one.
        step_transform: the transform before recursions t >= 2 (SPEC §1 ablation): 'linear'
            (default, h + Linear(h), D^2 + D parameters), 'shift' (h + b, D parameters) or 'none'
            (the identity: the unit re-applied to its own output, no parameters).
        timm_init: how the parameters that a timm/DeiT checkpoint lacks start when one is loaded
            (SPEC §6 decision): 'function' (default) biases every router toward recursion 1, which
            gets weight `FIRST_RECURSION_WEIGHT` = 0.99, so with the zero step transforms the model
            starts at DeiT's function for any T (measured: tools/analysis_tools/init_distance.py);
            'fresh' keeps the zero routers of the from-scratch init (uniform mixture: DeiT's
            trajectory re-applied and averaged). Without a checkpoint both are the zero init of SPEC §1.
        out_units: units whose outputs (the mixtures y_u) are returned (default: all, (0, 1, 2, 3)).
            `out_indices` (read-only) names them by the application step that ends each unit in
            the full T-recursion schedule, as every backbone's `out_indices` are steps.
        Other arguments: see `ViTBackbone` (`drop_path_rate` grows linearly over all `depth`
        applications of the T-recursion schedule; `with_cp` checkpoints each block application).

    Parameters: `blocks.{i}` (timm names), `step_transforms.{u}.{t}.proj` for 0-based recursion
    t >= 1 (recursion 0 has `nn.Identity`), `routers.{u}.proj` for units with T_u >= 2 (readout
    'soft'/'hard'). With 4 units and T = 4 that is 12 (D^2 + D) + 4 (4 D + 4) parameters over DeiT
    (S: +1.78M).

    Statistics (`self.stats` after every forward): `token_maps['mixture/unit{u}']` (B, T', h, w)
    the per-token weights the readout used (softmax; one-hot for 'hard' and 'final'; CLS
    excluded), `scalars['w/u{u}r{t}']` their mean over patch tokens (t 1-based),
    `scalars['recursions/u{u}']` the mean expected recursion sum_t t w_t; `work`: every block
    application, step transform and router.
    """

    def __init__(self, arch: str = 'small', embed_dim: int | None = None, num_blocks: int | None = None,
                 num_heads: int | None = None, unit_sizes: Sequence[int] | None = None,
                 num_recursions: int | Sequence[int] = 4, eval_recursions: int | Sequence[int] | None = None,
                 readout: str = 'soft', router_input: str = 'unit_input', step_transform: str = 'linear',
                 timm_init: str = 'function', out_units: Sequence[int] | None = None, **kwargs: Any) -> None:
        check_renamed('SRViT', kwargs, {
            'depth': 'num_blocks (the unique blocks; `depth` counts block applications, which follow from '
                     'unit_sizes and num_recursions)',
            'num_steps': 'num_recursions', 'eval_steps': 'eval_recursions',
            'out_indices': 'out_units (SR-ViT returns unit outputs)'})
        sizes = resolve_arch(arch, ARCH_SETTINGS, embed_dim=embed_dim, depth=num_blocks, num_heads=num_heads)
        num_blocks = check_int('num_blocks', sizes['depth'], 1)
        unit_sizes = self._check_unit_sizes(unit_sizes, num_blocks)
        recursions = _per_unit('num_recursions', num_recursions, len(unit_sizes), 1)
        check_choice('readout', readout, list(READOUTS))
        check_choice('router_input', router_input, list(ROUTER_INPUTS))
        check_choice('step_transform', step_transform, list(STEP_TRANSFORMS))
        check_choice('timm_init', timm_init, list(TIMM_INITS))
        depth = sum(n * t for n, t in zip(unit_sizes, recursions))
        super().__init__(embed_dim=sizes['embed_dim'], num_heads=sizes['num_heads'], depth=depth, **kwargs)
        self.readout = readout
        self.router_input = router_input
        self.step_transform, self.timm_init = step_transform, timm_init
        self.unit_sizes = unit_sizes
        self.num_recursions = recursions
        self.eval_recursions = eval_recursions
        self.out_units = check_out_indices(tuple(range(len(unit_sizes))) if out_units is None else out_units,
                                           len(unit_sizes), 'out_units')

        # The parameters: unique blocks, step transforms (recursion 0 has none), routers.
        self.blocks = nn.ModuleList(self.make_block() for _ in range(num_blocks))
        make = STEP_TRANSFORMS[self.step_transform] or (lambda _: nn.Identity())
        self.step_transforms = nn.ModuleList(
            nn.ModuleList([nn.Identity()] + [make(self.embed_dim) for _ in range(1, t)]) for t in recursions)
        self.routers = nn.ModuleDict({str(u): SoftRouter(self.embed_dim, t) for u, t in enumerate(recursions)
                                      if t > 1 and readout != 'final'})

        # The schedule: the block of every application step, unit after unit, recursion after recursion.
        starts = [sum(unit_sizes[:u]) for u in range(len(unit_sizes))]
        self.unit_blocks = tuple(tuple(range(s, s + n)) for s, n in zip(starts, unit_sizes))
        self.schedule = [b for u, blocks in enumerate(self.unit_blocks) for _ in range(recursions[u]) for b in blocks]
        self.unit_first_step = tuple(sum(n * t for n, t in zip(unit_sizes[:u], recursions[:u]))
                                     for u in range(len(unit_sizes)))

    @staticmethod
    def _check_unit_sizes(unit_sizes: Sequence[int] | None, num_blocks: int) -> tuple[int, ...]:
        if unit_sizes is None:
            if num_blocks % 6:
                raise ValueError(f'unit_sizes has no default for num_blocks={num_blocks} (defaults exist for '
                                 'multiples of 6: [n/3, n/3, n/6, n/6]); pass unit_sizes, positive ints summing to '
                                 'num_blocks')
            unit_sizes = [num_blocks // 3, num_blocks // 3, num_blocks // 6, num_blocks // 6]
        listed = check_sequence('unit_sizes', unit_sizes)
        sizes = tuple(check_int(f'unit_sizes[{u}]', n, 1) for u, n in enumerate(listed))
        if sum(sizes) != num_blocks:
            raise ValueError(f'unit_sizes must be positive ints summing to num_blocks ({num_blocks}), '
                             f'got {list(unit_sizes)} (sum {sum(sizes)})')
        return sizes

    @property
    def eval_recursions(self) -> tuple[int, ...]:
        """T'_u, the recursions each unit runs in eval mode (see the class docstring)."""
        return self._eval_recursions

    @eval_recursions.setter
    def eval_recursions(self, value: int | Sequence[int] | None) -> None:
        value = self.num_recursions if value is None else value
        self._eval_recursions = _per_unit('eval_recursions', value, len(self.num_recursions), 1, self.num_recursions)

    def unit_end(self, u: int) -> int:
        """The application step that ends unit u in the full schedule (its output's `out_indices` entry)."""
        return self.unit_first_step[u] + self.unit_sizes[u] * self.num_recursions[u] - 1

    @property
    def final_index(self) -> int:
        return self.unit_end(len(self.unit_sizes) - 1)

    def default_global_steps(self) -> tuple[int, ...]:
        """Global attention at the last application of every unit (its output, a multi-level feature)."""
        return tuple(self.unit_end(u) for u in range(len(self.unit_sizes)))

    @property
    def out_indices(self) -> tuple[int, ...]:
        """The steps ending the `out_units` (read-only; set `out_units`)."""
        return tuple(self.unit_end(u) for u in self.out_units)

    # ---- forward ------------------------------------------------------------------------------
    def forward_states(self, x: Tensor, indices: Sequence[int]) -> list[Tensor]:
        """Unit outputs (B, N, D), each asked for by the step that ends its unit (`unit_end`), in
        `indices` order."""
        ends = {self.unit_end(u): u for u in range(len(self.unit_sizes))}
        bad = [i for i in indices if i not in ends]
        if bad:
            raise ValueError(f'SRViT returns unit outputs: indices must be unit-end steps {sorted(ends)}, got {bad}')
        units = [ends[i] for i in indices]
        recursions = self.num_recursions if self.training else self.eval_recursions
        wanted = {u: None for u in units}
        maps, self.stats = {}, ForwardStats()
        for u in range(max(units) + 1):
            x, weights = self.run_unit(u, x, recursions[u])
            maps[f'mixture/unit{u}'] = weights[:, self.num_prefix_tokens:].transpose(1, 2)  # (B, T', h*w)
            if u in wanted:
                wanted[u] = x
        self.stats.token_maps.update(maps)
        self.stats.scalars.update(self._scalars(maps))
        return [wanted[u] for u in units]

    def unit_work(self, u: int, tokens: int, num_recursions: int) -> list:
        """What `run_unit(u, ...)` computes on `tokens` tokens per image, in execution order (`flops.py`)."""
        work, D = [], self.embed_dim
        router = self.routers[str(u)] if str(u) in self.routers else None
        if router is not None and self.router_input == 'unit_input':
            work.append(linear_work(f'routers.{u}', tokens, D, router.proj.out_features))
        for t in range(num_recursions):
            if t and self.step_transform == 'linear':
                work.append(linear_work(f'step_transforms.{u}.{t}', tokens, D, D))
            work += [self.step_work(self.unit_first_step[u] + t * self.unit_sizes[u] + j, tokens)
                     for j in range(self.unit_sizes[u])]
            if router is not None and self.router_input != 'unit_input':
                work.append(linear_work(f'routers.{u}', tokens, D, 1))
        return work

    def compute_setting(self, fraction: float, grid: tuple[int, int]) -> dict[str, Any]:
        """`compute` -> `eval_recursions` for one forward (the class docstring's chain of settings)."""
        tokens = grid[0] * grid[1] + self.num_prefix_tokens
        chain = [tuple(self.eval_recursions)]
        while max(chain[-1]) > 1:  # one recursion less, from the unit with the most (the last on ties)
            t = list(chain[-1])
            u = max(range(len(t)), key=lambda i: (t[i], i))
            t[u] -= 1
            chain.append(tuple(t))
        chain.reverse()  # smallest first
        embed = conv_work('patch_embed', self.patch_embed.proj, grid).flops

        def flops(recursions: Sequence[int]) -> float:
            return embed + sum(total_flops(self.unit_work(u, tokens, t)) for u, t in enumerate(recursions))

        i = largest_within(fraction, flops(self.num_recursions), lambda i: flops(chain[i]), len(chain))
        return {} if i == len(chain) - 1 else {'eval_recursions': chain[i]}

    def run_unit(self, u: int, x: Tensor, num_recursions: int) -> tuple[Tensor, Tensor]:
        """Unit u for `num_recursions` recursions: its output (B, N, D) and the readout weights
        (B, N, T') of every token (detached, for statistics). Adds its work (`unit_work`) to `self.stats`."""
        router = self.routers[str(u)] if str(u) in self.routers else None
        unit_logits = None
        if router is not None and self.router_input == 'unit_input':
            unit_logits = full_precision(router, x)
        mixture, logits, h = RecursionMixture(self.readout), [], x
        for t in range(num_recursions):
            h = self.step_transforms[u][t](h)  # S_{u,t}; the identity before recursion 0
            for j, b in enumerate(self.unit_blocks[u]):
                h = self.run_block(self.blocks[b], h, self.unit_first_step[u] + t * self.unit_sizes[u] + j)
            if router is None:
                z = None
            else:
                if unit_logits is not None:
                    z = unit_logits[..., t: t + 1]
                else:
                    z = router.recursion_logit(h, t)  # (B, N, 1)
                z = self.guard_finite(f'routers.{u} logits', f'unit {u}, recursion {t + 1}', z, router)
            mixture.add(h, z)
            if z is not None:
                logits.append(z.detach())
        self.stats.work += self.unit_work(u, x.shape[1], num_recursions)
        return mixture.result(), self._readout_weights(logits, num_recursions, x)

    def _readout_weights(self, logits: list[Tensor], num_recursions: int, x: Tensor) -> Tensor:
        """The per-token weights the readout applied: (B, N, T')."""
        if not logits:  # 'final' or no router: everything on the last recursion
            weights = x.new_zeros(*x.shape[:2], num_recursions)
            weights[..., -1] = 1.0
            return weights
        z = torch.cat(logits, dim=-1)  # T' x (B, N, 1) -> (B, N, T')
        if self.readout == 'hard':
            return F.one_hot(z.argmax(-1), num_recursions).to(z.dtype)
        return z.softmax(-1)

    def _scalars(self, maps: dict[str, Tensor]) -> dict[str, Tensor]:
        scalars = {}
        for u in range(len(maps)):
            w = maps[f'mixture/unit{u}']  # (B, T', h*w)
            mean = w.mean(dim=(0, 2))
            for t, m in enumerate(mean.unbind(), start=1):
                scalars[f'w/u{u}r{t}'] = m
            scalars[f'recursions/u{u}'] = (mean * torch.arange(1, w.shape[1] + 1, dtype=w.dtype, device=w.device)).sum()
        return scalars

    # ---- layer-wise learning-rate decay --------------------------------------------------------
    def layer_positions(self) -> dict[str, list[int]]:
        """Block b sits at position b + 1 for each of its T_u applications (see `ViTBackbone.layer_depth`).

        Our decision: the recursion inside a unit stays at the unit's place in the DeiT stack the
        blocks come from, so the layer scale is DeiT's (`num_layers` = depth + 1 for every T).
        Counting the sum_u n_u T_u applications instead (48 at T=4) would put the embeddings at
        rate^49 and unit 0 near rate^40 with decay rates tuned for 12 layers; and T is a test-time
        knob (`eval_recursions`), so the optimizer groups, like the checkpoint keys, depend only on the
        unique parameters. T=1 is DeiT's rule exactly. Step transforms and routers are not listed:
        fresh parameters, lr scale 1.
        """
        return {f'blocks.{b}': [b + 1] * self.num_recursions[u] for u, blocks in enumerate(self.unit_blocks)
                for b in blocks}

    # ---- weights ------------------------------------------------------------------------------
    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """Block i <- timm/DeiT block i (SPEC §6); step transforms keep their zero initialisation
        (logged) and the routers start as `timm_init` says (class docstring)."""
        _, blocks = split_timm_blocks(state_dict)
        if len(blocks) != self.num_blocks:
            raise ValueError(f'cannot map a {len(blocks)}-block checkpoint onto SRViT with '
                             f'num_blocks={self.num_blocks}: SR-ViT block i takes checkpoint block i')
        out = fresh_parameters(self, dict(state_dict), r'^(step_transforms|routers)\.')
        if self.timm_init == 'function':
            for key in [k for k in out if k.startswith('routers.') and k.endswith('.bias')]:
                T = out[key].numel()
                bias = torch.zeros_like(out[key])
                bias[0] = math.log(FIRST_RECURSION_WEIGHT * (T - 1) / (1 - FIRST_RECURSION_WEIGHT))
                out[key] = bias  # softmax([b, 0, ..., 0])[0] = FIRST_RECURSION_WEIGHT
        return out
