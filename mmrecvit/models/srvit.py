"""SR-ViT: SoftMoR's per-token soft mixture over recursions (SPEC §1).

A DeiT's blocks are grouped into recursion units of consecutive blocks, coarse to fine. Unit u (block stack
f_u, input x) runs T_u recursions and reads its trajectory out per token:

    h_1 = f_u(x),   h_t = f_u(S_{u,t}(h_{t-1}))  for t = 2..T_u       S_{u,t}(h) = h + Linear_{u,t}(h)
    w = softmax(R_u(x))  (per token, over recursions),   y_u = sum_t w_t * h_t

and y_u is the next unit's input and the u-th multi-level feature (SPEC §5). Decisions and measurements:
docs/methods/srvit.md.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .arguments import check_out_indices, deprecated, resolve_arch, stage_ends
from .backbone import ViTBackbone
from .checkpoint import fresh_parameters, split_timm_blocks
from .checks import check_choice, check_int, check_renamed, check_sequence
from .flops import linear_work
from .numerics import full_precision
from .plan import Forward, Plan, Step, step_work
from .registry import register_backbone
from .srvit_layers import STEP_TRANSFORMS, RecursionMixture, SoftRouter

READOUTS = ('soft', 'final', 'hard')
ROUTER_INPUTS = ('unit_input', 'recursion_states')
TIMM_INITS = ('function', 'fresh')
# `timm_init='function'`: the share of recursion 1 in every router's initial mixture.
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
    """SR-ViT (SoftMoR, SPEC §1) as a dense-prediction backbone (SPEC §5).

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' (aliases 'ti', 's', 'b', 'l'); `embed_dim`, `depth` and
            `num_heads` override the table.
        depth: L, the layers: the unique blocks (DeiT's layers, block i <- DeiT block i). Each unit runs its
            layers `num_recursions` times in place, so the model has `num_steps` = sum_u unit_sizes[u] * T_u
            block applications (48 for S with T = 4; SPEC's L, which issue 27 renames). (`num_blocks`,
            deprecated, is the same number.)
        unit_sizes: blocks per recursion unit, consecutive and coarse to fine, summing to `depth`. Default
            (SPEC §1 decision): [4, 4, 2, 2] for 12, the same proportions [n/3, n/3, n/6, n/6] for any n
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
            no unused parameters in training; router_input and timm_init, the routers', are refused with it).
        router_input: what the Soft Router reads (SPEC §1 decision: 'unit_input'); 'recursion_states' scores
            recursion t from its own state with row t of the same Linear (same keys and shapes).
        step_transform: the transform before recursions t >= 2: 'linear' (default), 'shift' or 'none'.
        timm_init: the routers' start from a timm/DeiT checkpoint: 'function' (default) puts 0.99 on recursion 1,
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

    mode_arguments = {'router_input': ('readout', ('final',)), 'timm_init': ('readout', ('final',))}  # checks.py

    def __init__(
        self,
        arch: str = 'small',
        embed_dim: int | None = None,
        depth: int | None = None,
        num_heads: int | None = None,
        unit_sizes: Sequence[int] | None = None,
        num_recursions: int | Sequence[int] = 4,
        eval_recursions: int | Sequence[int] | None = None,
        readout: str = 'soft',
        router_input: str = 'unit_input',
        step_transform: str = 'linear',
        timm_init: str = 'function',
        **kwargs: Any,
    ) -> None:
        check_renamed('SRViT', kwargs, {'num_steps': 'num_recursions', 'eval_steps': 'eval_recursions'})
        num_blocks = deprecated('SRViT', kwargs, 'num_blocks', 'depth', ' (the layers are the unique blocks)')
        if num_blocks is not None:
            check_int('num_blocks', num_blocks, 1)
        if num_blocks is not None and depth is not None and num_blocks != depth:
            raise ValueError(f'SRViT: num_blocks={num_blocks} (deprecated) and depth={depth} disagree; pass depth only')
        sizes = resolve_arch(
            arch, embed_dim=embed_dim, depth=depth if num_blocks is None else num_blocks, num_heads=num_heads
        )
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
        self.timm_init = check_choice('timm_init', timm_init, list(TIMM_INITS))
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
        self.unit_first_step = tuple(sum(n * t for n, t in zip(units[:u], recursions[:u])) for u in range(len(units)))
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

    # ---- the forward ----------------------------------------------------------------------------
    def forward_layers(self, x: Tensor, fwd: Forward) -> Tensor:
        """Unit after unit: T_u recursions of the unit's blocks (a step transform before each but the first), then
        the per-token mixture of the recursions (`RecursionMixture`), the next unit's input and the unit's output.
        T_u: `unit_recursions` in training, `eval_recursions` in eval, fewer with the compute knob."""
        T = self.unit_recursions if self.training else self.eval_recursions
        if fwd.compute is not None:
            T = self.within(fwd.compute, fwd.grid, self.recursion_settings())
        fwd.setting, maps = T, {}
        for u, blocks in enumerate(self.unit_blocks):
            router = self.routers[str(u)] if str(u) in self.routers else None
            unit_logits = None
            if router is not None and self.router_input == 'unit_input':  # all T' logits at once, checked at once
                where = [f'unit {u}, recursion {t + 1}' for t in range(T[u])]
                z = full_precision(router, x)[..., : T[u]].movedim(-1, 0)  # (B, N, T) -> (T', B, N)
                unit_logits = fwd.finite(f'routers.{u} logits', where, z, router).movedim(0, -1)  # (B, N, T')
            mixture, logits, h = RecursionMixture(self.readout), [], x
            for t in range(T[u]):
                h = self.step_transforms[u][t](h)  # S_{u,t}; the identity before recursion 0
                for j, b in enumerate(blocks):
                    h = self.run_block(self.blocks[b], h, self.unit_first_step[u] + t * len(blocks) + j, fwd)
                    if t == T[u] - 1 and b != blocks[-1] and b in fwd.layers:  # inside the unit: its last recursion
                        fwd.keep((b,), h)
                        if b == fwd.stop:
                            return self._statistics(maps, fwd, h)
                z = None
                if unit_logits is not None:
                    z = unit_logits[..., t : t + 1]
                    logits.append(z.detach())
                elif router is not None:  # 'recursion_states': recursion t scored from its own state
                    z = router.recursion_logit(h, t)
                    z = fwd.finite(f'routers.{u} logits', f'unit {u}, recursion {t + 1}', z, router)
                    logits.append(z.detach())
                mixture.add(h, z)
            x = mixture.result()  # y_u: the next unit's input
            weights = self._readout_weights(logits, T[u], x)  # (B, N, T')
            maps[f'mixture/unit{u}'] = weights[:, self.num_prefix_tokens :].transpose(1, 2)  # (B, T', h*w)
            if blocks[-1] in fwd.layers:
                fwd.keep((blocks[-1],), x)
            if blocks[-1] >= fwd.stop:
                break
        return self._statistics(maps, fwd, x)

    def plan(self, setting: Sequence[int] | None, grid: tuple[int, int]) -> Plan:
        """Unit after unit, recursion after recursion (`setting`: the recursions of each unit; None: all T), the
        unit's blocks in order; a step transform before each recursion t >= 1, the router before or after
        (`router_input`)."""
        T = self.unit_recursions if setting is None else setting
        tokens, D = grid[0] * grid[1] + self.num_prefix_tokens, self.embed_dim
        steps = []
        for u, blocks in enumerate(self.unit_blocks):
            router = self.routers[str(u)] if str(u) in self.routers else None
            for t in range(T[u]):
                for j, b in enumerate(blocks):
                    index = self.unit_first_step[u] + t * len(blocks) + j
                    before, after = [], []
                    if j == 0 and t == 0 and router is not None and self.router_input == 'unit_input':
                        before.append(linear_work(f'routers.{u}', tokens, D, router.proj.out_features))
                    if j == 0 and t and self.step_transform == 'linear':
                        before.append(linear_work(f'step_transforms.{u}.{t}', tokens, D, D))
                    if j == len(blocks) - 1 and router is not None and self.router_input != 'unit_input':
                        after.append(linear_work(f'routers.{u}', tokens, D, 1))
                    windows = self.windows(index, grid, layer=b)
                    work = step_work(self.blocks[b], tokens, windows)
                    steps.append(Step(index, b, b, work, windows, tuple(before), tuple(after)))
        return Plan(tuple(steps))

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

    def _statistics(self, maps: dict[str, Tensor], fwd: Forward, x: Tensor) -> Tensor:
        """The readout weights of the units run and their means into `fwd.stats`; returns `x`."""
        fwd.stats.token_maps.update(maps)
        fwd.stats.scalars.update(self._scalars(maps))
        return x

    def _scalars(self, maps: dict[str, Tensor]) -> dict[str, Tensor]:
        scalars = {}
        for u in range(len(maps)):
            w = maps[f'mixture/unit{u}']  # (B, T', h*w)
            mean = w.mean(dim=(0, 2))
            for t, m in enumerate(mean.unbind(), start=1):
                scalars[f'w/u{u}r{t}'] = m
            scalars[f'recursions/u{u}'] = (mean * torch.arange(1, w.shape[1] + 1, dtype=w.dtype, device=w.device)).sum()
        return scalars

    # ---- weights ------------------------------------------------------------------------------
    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """Block i <- timm/DeiT block i (SPEC §6); step transforms keep their zero initialisation (logged) and
        the routers start as `timm_init` says."""
        _, blocks = split_timm_blocks(state_dict)
        if len(blocks) != self.depth:
            raise ValueError(
                f'cannot map a {len(blocks)}-block checkpoint onto SRViT with depth={self.depth}: '
                'SR-ViT block i takes checkpoint block i'
            )
        out = fresh_parameters(self, dict(state_dict), r'^(step_transforms|routers)\.')
        if self.timm_init == 'function':
            for key in [k for k in out if k.startswith('routers.') and k.endswith('.bias')]:
                T = out[key].numel()
                bias = torch.zeros_like(out[key])
                bias[0] = math.log(FIRST_RECURSION_WEIGHT * (T - 1) / (1 - FIRST_RECURSION_WEIGHT))
                out[key] = bias  # softmax([b, 0, ..., 0])[0] = FIRST_RECURSION_WEIGHT
        return out
