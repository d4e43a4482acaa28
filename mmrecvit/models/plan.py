"""The description of a forward that the FLOP model and the compute knob read: which block runs at each step,
on how many tokens, with which attention layout.

Every backbone describes the forward at a setting as a `Plan` (`ViTBackbone.plan(setting, grid)`; setting None:
full depth, every step over every token). The forward itself is a plain loop over the method's own structure
(`forward_layers`); the plan sits beside it, built once per (setting, grid) and cached by the backbone
(`ViTBackbone.cached_plan`), and gives what the forward computed (`Plan.work`, the entries `ForwardStats.work`
holds; a test per method checks that they agree), the compute knob's candidates (`plan_flops`), the attention
layout of every step (`layouts`) and the layer-decay positions (`layer_positions`).

A `Step` is one block application; its `work` is the counted `BlockWork` of that application (per image; the
token-adaptive methods fill it from the counts their routers decided), and `before` / `after` hold the other
work done around it (routers, step transforms).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from .flops import BlockWork, OpWork, Work
from .layers import Block
from .numerics import FiniteGuard, sanitize
from .stats import ForwardStats
from .windows import Global, Windows


@dataclass(frozen=True)
class Step:
    """One block application of a forward.

    index: t, the application step of the full schedule (stochastic depth, window layout and checkpointing
        follow it).
    layer: the layer it applies (0..depth-1); `out_indices` name layers (`ViTBackbone`'s vocabulary).
    block: which of the model's unique blocks runs (an index into `blocks`).
    work: what it computes, per image (`flops.BlockWork`).
    windows: its attention layout (`windows.Windows`; `windows.Global` for a global step with relative position
        biases), None for plain global attention.
    before, after: other work just before / after it (routers, step transforms).
    """

    index: int
    layer: int
    block: int
    work: BlockWork
    windows: Windows | Global | None = None
    before: tuple[OpWork, ...] = ()
    after: tuple[OpWork, ...] = ()


@dataclass(frozen=True)
class Plan:
    """A forward at one setting: its `steps` in execution order, `head` work before the first step (a ranker)
    and `tail` work after them (per image). The patch embedding is the backbone's and counted by it."""

    steps: tuple[Step, ...]
    head: tuple[OpWork, ...] = ()
    tail: tuple[OpWork, ...] = field(default=())

    def work(self) -> list[Work]:
        """Every entry of the forward's work, in execution order (`flops.py`)."""
        entries: list[Work] = list(self.head)
        for step in self.steps:
            entries += [*step.before, step.work, *step.after]
        return entries + list(self.tail)

    @property
    def layouts(self) -> tuple[Windows | Global | None, ...]:
        """The attention layout of each step, by its index (the steps of a full plan are 0..n-1)."""
        return tuple(step.windows for step in self.steps)

    def through(self, layer: int) -> Plan:
        """The plan without the steps after the last one of a layer <= `layer` (the last application of `layer`,
        SR-ViT's in the last recursion): a forward that needs no later layer stops there (`stop_early`)."""
        last = max((i for i, step in enumerate(self.steps) if step.layer <= layer), default=len(self.steps) - 1)
        return self if last == len(self.steps) - 1 else Plan(self.steps[: last + 1], self.head, self.tail)


class PlanCache:
    """A model's cached plans, layouts and FLOP counts by (what, setting, grid): `get(key, make)` makes a value once
    (at most `size` are kept, then the cache starts over); the backbone clears it whenever a public attribute is
    set (a knob, the training mode). While compiling or exporting nothing is cached (the grid may be symbolic)."""

    def __init__(self, size: int = 256) -> None:
        self.size, self.values = size, {}

    def get(self, key: tuple, make: Any) -> Any:
        if torch.compiler.is_compiling():
            return make()
        value = self.values.get(key)
        if value is None:
            value = make()
            if len(self.values) >= self.size:
                self.values.clear()
            self.values[key] = value
        return value

    def clear(self) -> None:
        self.values = {}


def rescaled_layers(layers: Sequence[int], depth: int, kept: int) -> tuple[int, ...]:
    """Output layers of a `depth`-layer stack for a forward of its first `kept` layers: layer i -> the kept
    layer `max(1, floor((i + 1) kept / depth)) - 1`, so every output keeps its relative depth (stage ends of
    12 layers (2, 5, 8, 11) become (0, 2, 3, 5) at 6) and the last layer stays the last; also for kept > depth
    (reViT run deeper than it was built)."""
    return tuple(max(1, (i + 1) * kept // depth) - 1 for i in layers)


def step_work(block: Block, tokens: int, windows: Windows | Global | None, share: float = 1.0) -> BlockWork:
    """One application of `block` over all `tokens` of a `share` of the images (per image)."""
    pairs = tokens * tokens if windows is None else windows.pairs()
    rel_queries, rel_keys = (0.0, 0.0) if windows is None else windows.rel_pos_work()
    return block.work(tokens * share, tokens * share, attn_pairs=pairs * share, rel_pos=(rel_queries * share, rel_keys))


class Forward:
    """The state of one forward, passed along it (never kept on the module, so forwards are re-entrant): its
    patch grid, the compute fraction in force, the finiteness checks, the layers it returns, the attention layout
    of each step (`layouts`), and what the method's loop reports: the states of the requested layers (`keep`),
    the `setting` it ran and its statistics (`stats`; work outside the plan in `stats.extra`).

    layers: the requested layers, sorted; `stop` the deepest one (the loop runs no layer after it).
    """

    __slots__ = ('grid', 'compute', 'check', 'guard', 'layers', 'stop', 'states', 'layouts', 'setting', 'stats')

    def __init__(
        self,
        grid: tuple[int, int],
        layers: Sequence[int],
        compute: float | None = None,
        check: tuple[str, str] | None = None,
    ) -> None:
        # check: (the backbone's name, 'raise' | 'warn') for the finiteness checks, made on the first one (`finite`);
        # None: only sanitise (while tracing).
        self.grid, self.compute, self.check, self.guard = grid, compute, check, None
        self.layers, self.stop = frozenset(layers), max(layers)
        self.states: dict[int, Tensor] = {}
        self.layouts: tuple[Windows | Global | None, ...] = ()
        self.setting: object = None
        # Not default factories: torch.compile cannot trace that call.
        self.stats = ForwardStats({}, {}, {}, {}, grid, None, [])

    def reads(self, kept: int, depth: int) -> tuple[dict[int, list[int]], int]:
        """For a forward of the first `kept` of `depth` layers: {layer run: the requested layers read after it}
        (`rescaled_layers`) and the last layer to run."""
        if kept == depth:
            return {i: [i] for i in self.layers}, self.stop
        reads: dict[int, list[int]] = {}
        for i, r in zip(sorted(self.layers), rescaled_layers(sorted(self.layers), depth, kept)):
            reads.setdefault(r, []).append(i)
        return reads, max(reads)

    def keep(self, layers: Sequence[int], x: Tensor) -> None:
        for i in layers:
            self.states[i] = x

    def finite(self, name: str, where: str | Sequence[str], value: Tensor, source: nn.Module | None = None) -> Tensor:
        """Router logits (or another tensor that must stay finite) -> the tensor to use (`numerics.FiniteGuard`):
        NaN/inf are replaced by 0 and reported at the end of the forward, naming `name` and `where`."""
        if self.check is None:
            return sanitize(value)
        if self.guard is None:
            self.guard = FiniteGuard(*self.check)
        return self.guard(name, where, value, source)
