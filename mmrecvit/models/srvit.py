"""SR-ViT: SoftMoR's per-token soft mixture over recursions (docs/methods/srvit.md).

A DeiT's blocks are grouped into recursion units of consecutive blocks, coarse to fine. Unit u (block stack
f_u, input x) runs T_u recursions and reads its trajectory out per token:

    h_1 = f_u(x),   h_t = f_u(S_{u,t}(h_{t-1}))  for t = 2..T_u       S_{u,t}(h) = h + Linear_{u,t}(h)
    w = softmax(R_u(x))  (per token, over recursions),   y_u = sum_t w_t * h_t

and y_u is the next unit's input and the u-th multi-level feature (docs/methods/README.md). Decisions and measurements:
docs/methods/srvit.md.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .arguments import check_out_indices, deprecated, renamed, resolve_sizes, stage_ends
from .backbone import ViTBackbone
from .checkpoint import fresh_parameters, split_timm_blocks
from .checks import check_choice, check_int, check_renamed, check_sequence
from .flops import Work, linear_work
from .numerics import finite, full_precision
from .registry import register_backbone
from .schedule import Step, step_work
from .srvit_layers import STEP_TRANSFORMS, RecursionMixture, SoftRouter
from .stats import ForwardStats

READOUTS = ('soft', 'final', 'hard')
ROUTER_INPUTS = ('unit_input', 'recursion_states')
ROUTER_INITS = ('function', 'fresh')
# `router_init='function'`: the share of recursion 1 in every router's initial mixture.
FIRST_RECURSION_WEIGHT = 0.99


def _per_unit(name: str, value: Any, num_units: int, low: int, high: Sequence[int] | None = None) -> tuple[int, ...]:
    """An int for every unit, or one int per unit, each in [low, high[u]]."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value] * num_units
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(
            f'{name} must be an int or a list of {num_units} ints (one per unit), got {type(value).__name__} {value!r}'
        )
    values = list(value)
    if len(values) != num_units:
        raise ValueError(f'{name} must be an int or a list of {num_units} ints (one per unit), got {value!r}')
    return tuple(check_int(f'{name}[{u}]', v, low, None if high is None else high[u]) for u, v in enumerate(values))


@register_backbone('srvit')
class SRViT(ViTBackbone):
    """SR-ViT (SoftMoR, docs/methods/srvit.md) as a dense-prediction backbone (docs/methods/README.md).

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' (aliases 'ti', 's', 'b', 'l'); `embed_dim`, `depth` and
            `num_heads` override the table.
        depth: L, the layers: the unique blocks (DeiT's layers, block i <- DeiT block i). Each unit runs its
            layers `num_recursions` times in place, so the model has `num_steps` = sum_u unit_sizes[u] * T_u
            block applications (48 for S with T = 4; the paper's L, which issue 27 renames). (`num_blocks`,
            deprecated, is the same number.)
        unit_sizes: blocks per recursion unit, consecutive and coarse to fine, summing to `depth`. Default
            (decision, docs/methods/srvit.md): [4, 4, 2, 2] for 12, the same proportions [n/3, n/3, n/6, n/6] for any n
            divisible by 6 (our decision); otherwise required.
        num_recursions: T, the recursions of every unit (int) or of each unit (list). Default 4. T = 1 is DeiT
            exactly (no step transforms, no routers).
        eval_recursions: T' <= T, the recursions each unit runs in eval mode (int or per-unit list; default T),
            the softmax taken over the first T' logits (renormalised). The parameters depend on T only, so a
            model trained with T loads strictly and runs with any T'. A plain attribute.
        compute: the test-time knob through `eval_recursions`: from the current T'_u, one recursion at a time
            from the unit that has the most left (the finer, later unit on ties), down to 1 per unit; the
            largest of these whose FLOPs are <= compute x those of the full T schedule runs.
        readout: 'soft' (default) the per-token softmax mixture; 'hard' the per-token argmax recursion with a
            straight-through gradient (`RecursionMixture`); 'final' the last state (naive recursion: no routers,
            no unused parameters in training; router_input and router_init, the routers', are refused with it).
        router_input: what the Soft Router reads (decision, docs/methods/srvit.md: 'unit_input');
            'recursion_states' scores recursion t from its own state with row t of the same Linear (same keys and
            shapes).
        step_transform: the transform before recursions t >= 2: 'linear' (default), 'shift' or 'none'.
        router_init: the routers' start from a timm/DeiT checkpoint: 'function' (default) puts 0.99 on recursion 1,
            so with the zero step transforms the model is DeiT's function for any T; 'fresh' zero routers.
        out_indices: layers whose states are returned (default: the units' last layers, (3, 7, 9, 11) for
            [4, 4, 2, 2]); the state after a unit's last layer is the unit's mixture y_u, after another layer
            the state of that layer in the unit's last recursion. (`out_units`, deprecated: unit numbers.)
        Other arguments: see `ViTBackbone` (`drop_path_rate` grows over all `num_steps` steps; `global_steps`
        default to the `global_layers` in every recursion).

    Attributes: `unit_recursions` T_u per unit (the argument `num_recursions`; the attribute of that name is
    deprecated, as MoR-ViT's `num_recursions` is one int), `eval_recursions`, `unit_sizes`, `global_layers`.

    Parameters: `blocks.{i}` (timm names), `step_transforms.{u}.{t}.proj` for recursions t >= 1,
    `routers.{u}.proj` for units with T_u >= 2 (readout 'soft'/'hard').

    Statistics: `token_maps['mixture/unit{u}']` (B, T', h, w) the per-token weights the readout used,
    `scalars['w/u{u}r{t}']` their means (t 1-based), `scalars['recursions/u{u}']` the mean expected recursion.
    """

    mode_arguments = {'router_input': ('readout', ('final',)), 'router_init': ('readout', ('final',))}  # checks.py

    def __init__(
        self,
        arch: str = 'small',
        *,
        depth: int | None = None,
        unit_sizes: Sequence[int] | None = None,
        num_recursions: int | Sequence[int] = 4,
        eval_recursions: int | Sequence[int] | None = None,
        readout: str = 'soft',
        router_input: str = 'unit_input',
        step_transform: str = 'linear',
        router_init: str = 'function',
        **kwargs: Any,
    ) -> None:
        check_renamed('SRViT', kwargs, {'num_steps': 'num_recursions', 'eval_steps': 'eval_recursions'})
        router_init = renamed('SRViT', kwargs, 'timm_init', 'router_init', router_init, 'function')
        num_blocks = deprecated('SRViT', kwargs, 'num_blocks', 'depth', ' (the layers are the unique blocks)')
        if num_blocks is not None:
            check_int('num_blocks', num_blocks, 1)
        if num_blocks is not None and depth is not None and num_blocks != depth:
            raise ValueError(f'SRViT: num_blocks={num_blocks} (deprecated) and depth={depth} disagree; pass depth only')
        sizes = resolve_sizes(arch, depth if num_blocks is None else num_blocks, kwargs)
        units = self._check_unit_sizes(unit_sizes, check_int('depth (the number of layers)', sizes['depth'], 1))
        recursions = _per_unit('num_recursions', num_recursions, len(units), 1)
        out_units = deprecated('SRViT', kwargs, 'out_units', 'out_indices', ' (unit u is the layer ending it)')
        if out_units is not None:
            ends = [sum(units[: u + 1]) - 1 for u in range(len(units))]
            kwargs['out_indices'] = [ends[u] for u in check_out_indices(out_units, len(units), 'out_units')]
        if kwargs.get('out_indices') is None:  # the units' last layers: their outputs are the mixtures y_u
            kwargs['out_indices'] = [sum(units[: u + 1]) - 1 for u in range(len(units))]
        super().__init__(**sizes, **kwargs)
        self.readout = check_choice('readout', readout, list(READOUTS))
        self.router_input = check_choice('router_input', router_input, list(ROUTER_INPUTS))
        self.step_transform = check_choice('step_transform', step_transform, list(STEP_TRANSFORMS))
        self.router_init = check_choice('router_init', router_init, list(ROUTER_INITS))
        self.unit_sizes, self.unit_recursions = units, recursions  # T_u per unit (MoR-ViT's num_recursions: an int)
        self.eval_recursions = eval_recursions

        # The parameters: unique blocks, step transforms (recursion 0 has none), routers.
        self.blocks = nn.ModuleList(self.make_block() for _ in range(self.depth))
        make = STEP_TRANSFORMS[self.step_transform] or (lambda _: nn.Identity())
        self.step_transforms = nn.ModuleList(
            nn.ModuleList([nn.Identity()] + [make(self.embed_dim) for _ in range(1, t)]) for t in recursions
        )
        self.routers = nn.ModuleDict(
            {str(u): SoftRouter(self.embed_dim, t) for u, t in enumerate(recursions) if t > 1 and readout != 'final'}
        )
        starts = [sum(units[:u]) for u in range(len(units))]
        self.unit_blocks = tuple(tuple(range(s, s + n)) for s, n in zip(starts, units))
        self.layer_blocks = tuple(range(self.depth))  # layer i runs block i (in every recursion of its unit)
        self.unit_first_step = tuple(sum(n * t for n, t in zip(units[:u], recursions[:u])) for u in range(len(units)))
        # (unit, recursion, position in the unit) of every step of the full schedule (the FLOP model's)
        self.step_position = tuple(
            (u, t, j) for u, n in enumerate(units) for t in range(recursions[u]) for j in range(n)
        )
        # Under windows, every recursion of a unit attends globally at the unit's global layers: ViTDet's stage
        # ends of the depth (a windowed PlainViT's), or the unit's last layer when it holds none (issue 37).
        ends = set(stage_ends(self.depth))
        self.global_layers = tuple(b for u in self.unit_blocks for b in ([b for b in u if b in ends] or [u[-1]]))

    @staticmethod
    def _check_unit_sizes(unit_sizes: Sequence[int] | None, depth: int) -> tuple[int, ...]:
        if unit_sizes is None:
            if depth % 6:
                raise ValueError(
                    f'unit_sizes has no default for depth={depth} (defaults exist for multiples of 6: '
                    '[n/3, n/3, n/6, n/6]); pass unit_sizes, positive ints summing to depth'
                )
            unit_sizes = [depth // 3, depth // 3, depth // 6, depth // 6]
        listed = check_sequence('unit_sizes', unit_sizes)
        sizes = tuple(check_int(f'unit_sizes[{u}]', n, 1) for u, n in enumerate(listed))
        if sum(sizes) != depth:
            raise ValueError(
                f'unit_sizes must be positive ints summing to depth ({depth}), '
                f'got {list(unit_sizes)} (sum {sum(sizes)})'
            )
        return sizes

    @property
    def num_recursions(self) -> tuple[int, ...]:
        """Deprecated: `unit_recursions` (a tuple per unit; MoR-ViT's `num_recursions` is an int)."""
        warnings.warn(
            'SRViT.num_recursions is deprecated; use unit_recursions instead (T per unit; the argument num_recursions '
            'is unchanged)',
            DeprecationWarning,
            stacklevel=2,
        )
        return self.unit_recursions

    @property
    def eval_recursions(self) -> tuple[int, ...]:
        """T'_u, the recursions each unit runs in eval mode (see the class docstring)."""
        return self._eval_recursions

    @eval_recursions.setter
    def eval_recursions(self, value: int | Sequence[int] | None) -> None:
        value = self.unit_recursions if value is None else value
        self._eval_recursions = _per_unit('eval_recursions', value, len(self.unit_recursions), 1, self.unit_recursions)

    def recursion_settings(self) -> list[tuple[int, ...]]:
        """The compute knob's candidates, smallest first: from the recursions in force, one less at a time from the
        unit with the most (the later unit on ties), down to one per unit."""
        chain = [tuple(self.eval_recursions)]
        while max(chain[-1]) > 1:
            t = list(chain[-1])
            u = max(range(len(t)), key=lambda i: (t[i], i))
            t[u] -= 1
            chain.append(tuple(t))
        return chain[::-1]

    # ---- settings and the forward ----------------------------------------------------------------
    @property
    def own_setting(self) -> tuple[int, ...]:
        """The recursions of each unit without the compute knob: `unit_recursions` in training, `eval_recursions` in
        eval."""
        return self.unit_recursions if self.training else self.eval_recursions

    def compute_settings(self, grid: tuple[int, int]) -> list[tuple[int, ...]]:
        return self.recursion_settings()

    def step_layers(self, recursions: Sequence[int] | None) -> list[tuple[int, int]]:
        """Unit after unit, recursion after recursion (`recursions` of each unit; None: all T), the unit's layers in
        order: step `unit_first_step[u] + t * n_u + j` applies layer j of unit u."""
        T = self.unit_recursions if recursions is None else recursions
        return [
            (self.unit_first_step[u] + t * len(blocks) + j, b)
            for u, blocks in enumerate(self.unit_blocks)
            for t in range(T[u])
            for j, b in enumerate(blocks)
        ]

    def iter_layers(
        self, x: Tensor, steps: tuple[Step, ...], recursions: Sequence[int], stats: ForwardStats
    ) -> Iterator[tuple[int, Tensor]]:
        """Unit after unit: T_u recursions of the unit's blocks (a step transform before each but the first), then
        the per-token mixture of the recursions (`RecursionMixture`), the next unit's input and the unit's output,
        yielded as its last layer (its other layers from its last recursion). `recursions`: T_u of each unit;
        the forward ends where `steps` do."""
        run, steps = self.block_runner(), iter(steps)
        for u, blocks in enumerate(self.unit_blocks):
            T, n = recursions[u], len(blocks)
            unit = tuple(itertools.islice(steps, T * n))  # its applications, recursion by recursion
            if not unit:
                return
            router = self.routers[str(u)] if str(u) in self.routers else None
            unit_logits = None
            if router is not None and self.router_input == 'unit_input':  # all T' logits at once, checked at once
                where = [f'unit {u}, recursion {t + 1}' for t in range(T)]
                z = full_precision(router, x)[..., :T].movedim(-1, 0)  # (B, N, T) -> (T', B, N)
                unit_logits = finite(f'routers.{u} logits', where, z, router).movedim(0, -1)  # (B, N, T')
            mixture, logits, h = RecursionMixture(self.readout), [], x
            for t in range(T):
                h = self.step_transforms[u][t](h)  # S_{u,t}; the identity before recursion 0
                for step in unit[t * n : (t + 1) * n]:
                    h = run(step.block, h, drop_path_rate=step.drop_path_rate, layout=step.layout)
                    if t == T - 1 and step.layer != blocks[-1]:  # inside the unit: its last recursion
                        yield step.layer, h
                if len(unit) < (t + 1) * n:  # the forward ends inside this recursion
                    return
                z = None
                if unit_logits is not None:
                    z = unit_logits[..., t : t + 1]
                    logits.append(z.detach())
                elif router is not None:  # 'recursion_states': recursion t scored from its own state
                    z = finite(
                        f'routers.{u} logits', f'unit {u}, recursion {t + 1}', router.recursion_logit(h, t), router
                    )
                    logits.append(z.detach())
                mixture.add(h, z)
            x = mixture.result()  # y_u: the next unit's input
            weights = self._readout_weights(logits, T, x)[:, self.num_prefix_tokens :].transpose(1, 2)  # (B, T', h*w)
            stats.token_maps[f'mixture/unit{u}'] = weights
            stats.scalars.update(self._scalars(u, weights, T))
            yield blocks[-1], x

    def drop_unreached(self, steps: Sequence[tuple[int, int]]) -> None:
        """Pruned at build (`pruning.py`): the later units' step transforms and routers, and the router of the unit
        the forward ends inside (its mixture, the one reader of the router's logits, is never formed)."""
        u, t, j = self.step_position[steps[-1][0]]
        mixed = t == self.unit_recursions[u] - 1 and j == len(self.unit_blocks[u]) - 1
        del self.step_transforms[u + 1 :]
        for key in [k for k in self.routers if int(k) > u or (int(k) == u and not mixed)]:
            del self.routers[key]

    def work(self, steps: tuple[Step, ...], recursions: Any, grid: tuple[int, int]) -> list[Work]:
        """Each step's block over every token; a step transform before each recursion t >= 1, the router before the
        unit (`router_input='unit_input'`) or after each recursion."""
        tokens, D = grid[0] * grid[1] + self.num_prefix_tokens, self.embed_dim
        work: list[Work] = []
        for step in steps:
            u, t, j = self.step_position[step.index]
            router, last = self.routers[str(u)] if str(u) in self.routers else None, j == len(self.unit_blocks[u]) - 1
            if j == 0 and t == 0 and router is not None and self.router_input == 'unit_input':
                work.append(linear_work(f'routers.{u}', tokens, D, router.proj.out_features))
            if j == 0 and t and self.step_transform == 'linear':
                work.append(linear_work(f'step_transforms.{u}.{t}', tokens, D, D))
            work.append(step_work(step.block, tokens, step.layout))
            if last and router is not None and self.router_input != 'unit_input':
                work.append(linear_work(f'routers.{u}', tokens, D, 1))
        return work

    def _readout_weights(self, logits: list[Tensor], num_recursions: int, x: Tensor) -> Tensor:
        """The per-token weights the readout applied: (B, N, T')."""
        if not logits:  # 'final' or no router: everything on the last recursion
            last = torch.arange(num_recursions, device=x.device) == num_recursions - 1  # (T',): fx traces this
            return last.to(x.dtype).expand(x.shape[0], x.shape[1], num_recursions)
        z = torch.cat(logits, dim=-1)  # T' x (B, N, 1) -> (B, N, T')
        if self.readout == 'hard':
            return F.one_hot(z.argmax(-1), num_recursions).to(z.dtype)
        return z.softmax(-1)

    @staticmethod
    def _scalars(u: int, weights: Tensor, T: int) -> dict[str, Tensor]:
        """The means of unit u's readout weights (B, T', h*w) per recursion and its mean expected recursion (T' =
        `T` given, not read from the shape: fx traces this with symbolic shapes)."""
        mean = weights.mean(dim=(0, 2))
        scalars = {f'w/u{u}r{t + 1}': mean[t] for t in range(T)}
        scalars[f'recursions/u{u}'] = (mean * torch.arange(1, T + 1, dtype=torch.float32, device=weights.device)).sum()
        return scalars

    # ---- weights ------------------------------------------------------------------------------
    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """Block i <- timm/DeiT block i (docs/methods/srvit.md); step transforms keep their zero initialisation
        (logged) and the routers start as `router_init` says."""
        _, blocks = split_timm_blocks(state_dict)
        if len(blocks) != self.depth:
            raise ValueError(
                f'cannot map a {len(blocks)}-block checkpoint onto SRViT with depth={self.depth}: '
                'SR-ViT block i takes checkpoint block i'
            )
        out = fresh_parameters(self, dict(state_dict), r'^(step_transforms|routers)\.')
        if self.router_init == 'function':
            for key in [k for k in out if k.startswith('routers.') and k.endswith('.bias')]:
                T = out[key].numel()
                bias = torch.zeros_like(out[key])
                bias[0] = math.log(FIRST_RECURSION_WEIGHT * (T - 1) / (1 - FIRST_RECURSION_WEIGHT))
                out[key] = bias  # softmax([b, 0, ..., 0])[0] = FIRST_RECURSION_WEIGHT
        return out
