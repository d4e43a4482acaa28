"""SR-ViT: SoftMoR's per-token soft mixture over recursion steps (SPEC §1).

A DeiT's blocks are grouped into recursion units of consecutive blocks, coarse to fine. Unit u
(block stack f_u, input x) runs T_u steps and reads its trajectory out per token:

    h_1 = f_u(x),   h_t = f_u(S_{u,t}(h_{t-1}))  for t = 2..T_u       S_{u,t}(h) = h + Linear_{u,t}(h)
    w = softmax(R_u(x))  (per token, over steps),   y_u = sum_t w_t * h_t

and y_u is the next unit's input and the u-th multi-level feature (SPEC §5).

Unique blocks and applications are separate things (STYLE 3): `blocks.{i}` are the parameters
(timm names, block i <- DeiT block i, SPEC §6) and `schedule` lists every block application as
(unit, step, block). Drop-path rates and activation checkpointing are indexed by application.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .checks import check_choice, check_int, check_sequence
from .vit import ARCH_SETTINGS, ViTBackbone, check_out_indices, resolve_arch

READOUTS = ('soft', 'final', 'hard')
ROUTER_INPUTS = ('unit_input', 'step_states')


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


class SoftRouter(nn.Module):
    """R_u: Linear(D -> T) scoring the T steps of a unit, zero-initialised (uniform mixture).

    `forward(x)` gives the logits of all steps from one input (the unit input, SPEC §1);
    `step_logit(h, t)` scores step t from its own state with row t only (the step-state option).
    """

    def __init__(self, dim: int, num_steps: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, num_steps)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x)  # (B, N, D) -> (B, N, T)

    def step_logit(self, h: Tensor, t: int) -> Tensor:
        return F.linear(h, self.proj.weight[t: t + 1], self.proj.bias[t: t + 1])  # (B, N, D) -> (B, N, 1)


class StepMixture:
    """One unit's readout, accumulated while stepping: it holds O(1) states, never all T (SPEC §1).

    `add(h_t, z_t)` takes each step's state (B, N, D) and router logit (B, N, 1) (None: no router);
    `result()` is the unit output. The soft mixture is an online softmax over steps with a running
    max m (a constant shift, detached: the mixture does not depend on it), normaliser s and sum a
    (m = z_1, s = 1, a = h_1 after the first step):

        m' = max(m, z_t),  s' = s e^(m - m') + e^(z_t - m'),  a' = a e^(m - m') + e^(z_t - m') h_t,

    so that a / s = sum_t softmax(z)_t h_t. This serves the router logits known up front (unit
    input) and those only known after each step (step states) alike.

    readout 'soft': a / s.  'final': the last state (router unused).  'hard': the state of the
    per-token argmax step (first one on ties, as `torch.argmax`), with the straight-through
    gradient of one-hot(argmax) + w - sg(w): the state receives the gradient of the chosen step
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
        arch: 'tiny' | 'small' | 'base' (aliases 'ti', 's', 'b'); `embed_dim`, `depth` and
            `num_heads` override the table (as `PlainViT`). `depth` is the number of unique blocks.
        unit_sizes: blocks per recursion unit, consecutive and coarse to fine; must sum to `depth`.
            Default (SPEC §1 decision): [4, 4, 2, 2] for 12 blocks, and the same proportions
            [d/3, d/3, d/6, d/6] for any depth d divisible by 6 (our decision); otherwise required.
        num_steps: T, the recursion steps of every unit (int) or of each unit (list). Default 4.
            T = 1 is DeiT exactly (no step transforms, no routers). Note that the base-class
            attribute `self.num_steps` counts block applications, sum_u unit_sizes[u] * T_u;
            T is `self.unit_steps`.
        eval_steps: T' <= T, the steps each unit runs in eval mode (int or per-unit list; default
            T). A test-time knob: the router logits of the first T' steps are kept and the softmax
            taken over them (renormalised); the parameters, hence the checkpoint keys, depend on T
            only, so a model trained with T loads strictly and runs with any T'. Training always
            runs T. Can be changed after construction (`model.eval_steps = 2`).
        readout: 'soft' (default): the per-token softmax mixture over steps. 'final': the last
            state only (naive recursion, the paper's ablation); builds no routers, so its
            checkpoint has no router keys (our decision: no unused parameters in training).
            'hard': the per-token argmax step, straight-through gradient (see `StepMixture`);
            with the zero-initialised router all steps tie and step 1 is chosen until it learns.
        router_input: what the Soft Router reads (SPEC §1 decision: 'unit_input').
            'unit_input': logits z = R_u(x) from the unit input x, for all steps at once.
            'step_states': the logit of step t is row t of the same Linear applied to that step's
            state, z_t = W_u[t] . h_t + b_u[t]; the softmax over steps is the same. Same keys and
            shapes in both cases, so the choice is a forward-time one.
        out_indices: unit indices whose outputs are returned (default: all units, (0, 1, 2, 3)).
        Other arguments: see `ViTBackbone` (`drop_path_rate` grows linearly over all
        sum_u unit_sizes[u] * T_u applications of the T-step schedule; `with_cp` checkpoints each
        block application).

    Parameters: `blocks.{i}` (timm names), `step_transforms.{u}.{t}.proj` for 0-based step t >= 1
    (step 0 is `nn.Identity`), `routers.{u}.proj` for units with T_u >= 2 (readout 'soft'/'hard').
    With 4 units and T = 4 that is 12 (D^2 + D) + 4 (4 D + 4) parameters over DeiT (S: +1.78M).

    Statistics (`self.stats` after every forward): `token_maps['mixture/unit{u}']` (B, T', h, w)
    the per-token weights the readout used (softmax; one-hot for 'hard' and 'final'; CLS
    excluded), `scalars['w/u{u}s{t}']` their mean over patch tokens (t 1-based),
    `scalars['depth/u{u}']` the mean expected step sum_t t w_t, and one `StepWork` per block
    application (the D x D step transforms and routers are not in `StepWork`'s FLOPs).
    """

    def __init__(self, arch: str = 'small', embed_dim: int | None = None, depth: int | None = None,
                 num_heads: int | None = None, unit_sizes: Sequence[int] | None = None,
                 num_steps: int | Sequence[int] = 4, eval_steps: int | Sequence[int] | None = None,
                 readout: str = 'soft', router_input: str = 'unit_input',
                 out_indices: Sequence[int] | None = None, **kwargs: Any) -> None:
        sizes = resolve_arch(arch, ARCH_SETTINGS, embed_dim=embed_dim, depth=depth, num_heads=num_heads)
        depth = check_int('depth', sizes['depth'], 1)
        unit_sizes = self._check_unit_sizes(unit_sizes, depth)
        unit_steps = _per_unit('num_steps', num_steps, len(unit_sizes), 1)
        check_choice('readout', readout, list(READOUTS))
        check_choice('router_input', router_input, list(ROUTER_INPUTS))
        num_applications = sum(n * t for n, t in zip(unit_sizes, unit_steps))
        super().__init__(embed_dim=sizes['embed_dim'], num_heads=sizes['num_heads'], num_steps=num_applications,
                         **kwargs)
        self.depth = depth
        self.readout = readout
        self.router_input = router_input
        self.unit_sizes = unit_sizes
        self.unit_steps = unit_steps
        self.eval_steps = eval_steps
        self.out_indices = check_out_indices(tuple(range(len(unit_sizes))) if out_indices is None else out_indices,
                                             len(unit_sizes))

        # The parameters: unique blocks, step transforms (step 0 has none), routers.
        self.blocks = nn.ModuleList(self.make_block() for _ in range(depth))
        self.step_transforms = nn.ModuleList(
            nn.ModuleList([nn.Identity()] + [StepTransform(self.embed_dim) for _ in range(1, t)]) for t in unit_steps)
        self.routers = nn.ModuleDict({str(u): SoftRouter(self.embed_dim, t) for u, t in enumerate(unit_steps)
                                      if t > 1 and readout != 'final'})

        # The schedule: application index -> (unit, step, unique block), in execution order.
        starts = [sum(unit_sizes[:u]) for u in range(len(unit_sizes))]
        self.unit_blocks = tuple(tuple(range(s, s + n)) for s, n in zip(starts, unit_sizes))
        self.schedule = [(u, t, b) for u, blocks in enumerate(self.unit_blocks) for t in range(unit_steps[u])
                         for b in blocks]
        self.unit_first_application = tuple(sum(n * t for n, t in zip(unit_sizes[:u], unit_steps[:u]))
                                            for u in range(len(unit_sizes)))

    @staticmethod
    def _check_unit_sizes(unit_sizes: Sequence[int] | None, depth: int) -> tuple[int, ...]:
        if unit_sizes is None:
            if depth % 6:
                raise ValueError(f'unit_sizes has no default for depth={depth} (defaults exist for depths divisible '
                                 'by 6: [d/3, d/3, d/6, d/6]); pass unit_sizes, positive ints summing to depth')
            unit_sizes = [depth // 3, depth // 3, depth // 6, depth // 6]
        listed = check_sequence('unit_sizes', unit_sizes)
        sizes = tuple(check_int(f'unit_sizes[{u}]', n, 1) for u, n in enumerate(listed))
        if sum(sizes) != depth:
            raise ValueError(f'unit_sizes must be positive ints summing to depth ({depth}), '
                             f'got {list(unit_sizes)} (sum {sum(sizes)})')
        return sizes

    @property
    def eval_steps(self) -> tuple[int, ...]:
        """T'_u, the steps each unit runs in eval mode (see the class docstring)."""
        return self._eval_steps

    @eval_steps.setter
    def eval_steps(self, value: int | Sequence[int] | None) -> None:
        value = self.unit_steps if value is None else value
        self._eval_steps = _per_unit('eval_steps', value, len(self.unit_steps), 1, self.unit_steps)

    # ---- forward ------------------------------------------------------------------------------
    def forward_states(self, x: Tensor, indices: Sequence[int]) -> list[Tensor]:
        """Token states (B, N, D) of the requested units' outputs, in `indices` order."""
        steps = self.unit_steps if self.training else self.eval_steps
        wanted = {u: None for u in indices}
        maps, applications = {}, 0
        for u in range(max(indices) + 1):
            x, weights = self.run_unit(u, x, steps[u])
            applications += steps[u] * self.unit_sizes[u]
            maps[f'mixture/unit{u}'] = weights[:, self.num_prefix_tokens:].transpose(1, 2)  # (B, T', h*w)
            if u in wanted:
                wanted[u] = x
        self.stats = self.dense_stats(x.shape[1], applications)
        self.stats.token_maps.update(maps)
        self.stats.scalars.update(self._scalars(maps))
        return [wanted[u] for u in indices]

    def run_unit(self, u: int, x: Tensor, num_steps: int) -> tuple[Tensor, Tensor]:
        """Unit u for `num_steps` steps: its output (B, N, D) and the readout weights (B, N, T') of
        every token (detached, for statistics)."""
        router = self.routers[str(u)] if str(u) in self.routers else None
        unit_logits = router(x) if router is not None and self.router_input == 'unit_input' else None
        mixture, logits, h = StepMixture(self.readout), [], x
        for t in range(num_steps):
            h = self.step_transforms[u][t](h)  # S_{u,t}; the identity at step 0
            for j, b in enumerate(self.unit_blocks[u]):
                h = self.run_block(self.blocks[b], h, self.unit_first_application[u] + t * self.unit_sizes[u] + j)
            if router is None:
                z = None
            else:
                z = unit_logits[..., t: t + 1] if unit_logits is not None else router.step_logit(h, t)  # (B, N, 1)
                z = self.guard_finite(f'routers.{u} logits', f'unit {u}, step {t + 1}', z)
            mixture.add(h, z)
            if z is not None:
                logits.append(z.detach())
        return mixture.result(), self._readout_weights(logits, num_steps, x)

    def _readout_weights(self, logits: list[Tensor], num_steps: int, x: Tensor) -> Tensor:
        """The per-token weights the readout applied: (B, N, T')."""
        if not logits:  # 'final' or no router: everything on the last step
            weights = x.new_zeros(*x.shape[:2], num_steps)
            weights[..., -1] = 1.0
            return weights
        z = torch.cat(logits, dim=-1)  # T' x (B, N, 1) -> (B, N, T')
        if self.readout == 'hard':
            return F.one_hot(z.argmax(-1), num_steps).to(z.dtype)
        return z.softmax(-1)

    def _scalars(self, maps: dict[str, Tensor]) -> dict[str, Tensor]:
        scalars = {}
        for u in range(len(maps)):
            w = maps[f'mixture/unit{u}']  # (B, T', h*w)
            mean = w.mean(dim=(0, 2))
            for t, m in enumerate(mean.unbind(), start=1):
                scalars[f'w/u{u}s{t}'] = m
            scalars[f'depth/u{u}'] = (mean * torch.arange(1, w.shape[1] + 1, dtype=w.dtype, device=w.device)).sum()
        return scalars

    # ---- layer-wise learning-rate decay --------------------------------------------------------
    def layer_positions(self) -> dict[str, list[int]]:
        """Block b sits at position b + 1 for each of its T_u applications (see `ViTBackbone.layer_depth`).

        Our decision: the recursion inside a unit stays at the unit's place in the DeiT stack the
        blocks come from, so the layer scale is DeiT's (`num_layers` = depth + 1 for every T).
        Counting the sum_u n_u T_u applications instead (48 at T=4) would put the embeddings at
        rate^49 and unit 0 near rate^40 with decay rates tuned for 12 layers; and T is a test-time
        knob (`eval_steps`), so the optimizer groups, like the checkpoint keys, depend only on the
        unique parameters. T=1 is DeiT's rule exactly. Step transforms and routers are not listed:
        fresh parameters, lr scale 1.
        """
        return {f'blocks.{b}': [b + 1] * self.unit_steps[u] for u, blocks in enumerate(self.unit_blocks)
                for b in blocks}

    # ---- weights ------------------------------------------------------------------------------
    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """Block i <- timm/DeiT block i (SPEC §6); step transforms and routers keep their zero
        initialisation (logged), so the loaded model follows DeiT's trajectory in every unit."""
        from .checkpoint import fresh_parameters, split_timm_blocks

        _, blocks = split_timm_blocks(state_dict)
        if len(blocks) != self.depth:
            raise ValueError(f'cannot map a {len(blocks)}-block checkpoint onto SRViT with depth={self.depth}: '
                             'SR-ViT block i takes checkpoint block i, so the depths must be equal')
        return fresh_parameters(self, dict(state_dict), r'^(step_transforms|routers)\.')
