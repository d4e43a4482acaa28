"""The schedule a forward runs, plain data the forward owns, and the FLOP plan derived from it when asked.

A forward's schedule is a tuple of `Step`s, one per block application in execution order: its index t, the layer
it applies, the unique block that runs (the module itself) and its attention layout (and its stochastic-depth
rate). The backbone builds it once per key -- the setting, the input's patch grid and every knob that changes it
(training mode, window size, global steps, depth) -- and keeps it (`ViTBackbone.steps`); a forward that needs no
later layer runs the schedule up to the last application of the deepest layer it reads (`through`).

The FLOP model is not built by the forward: a forward's statistics hold what it ran (its steps and setting), and the
`Plan` -- every entry of its work in execution order (`flops.py`) -- is derived from them by the method's `work`
when something reads it (`ForwardStats.plan`, `.work`, `.flops`; the compute knob's candidates), cached by the same
plain data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from .compute import largest_within
from .flops import BlockWork, OpWork, Work, conv_work, total_flops
from .layers import Block
from .windows import Global, Windows


class Step(NamedTuple):
    """One block application of a forward.

    index: t, the application step of the full schedule (stochastic depth and checkpointing follow it).
    layer: the layer it applies (0..depth-1); `out_indices` name layers (`ViTBackbone`'s vocabulary).
    block: the unique block that runs (one of the model's `blocks`, the module; hashed by identity).
    layout: its attention layout: `windows.Windows`, `windows.Global` (a global step with relative position
        biases), None for timm's dense attention.
    drop_path_rate: its stochastic depth (0 in eval).
    read: the forward reads its layer's state after it (set on the steps a forward is handed: the base class reads
        what the method yields; a method whose states cost work to produce, reViT's per image, produces these only).
    """

    index: int
    layer: int
    block: Block
    layout: Windows | Global | None
    drop_path_rate: float
    read: bool = False


@dataclass(frozen=True)
class Plan:
    """What a forward that ran `steps` computed, per image: `entries`, every `BlockWork` and `OpWork` (routers,
    rankers, step transforms) in execution order. The patch embedding is the backbone's and counted by it."""

    steps: tuple[Step, ...]
    entries: tuple[Work, ...]

    def work(self) -> list[Work]:
        """Every entry of the forward's work, in execution order (`flops.py`)."""
        return list(self.entries)


def through(steps: tuple[Step, ...], layer: int) -> tuple[Step, ...]:
    """The steps up to the last one of a layer <= `layer` (the last application of `layer`, SR-ViT's in its last
    recursion): a forward that needs no later layer stops there."""
    return steps[: reach([step.layer for step in steps], layer)]


def reach(layers: Sequence[int], layer: int) -> int:
    """How many of the applications of `layers` (in execution order) a forward that needs no layer after `layer`
    runs: those up to the last one of a layer <= `layer` (`through`)."""
    return max((i for i, applied in enumerate(layers) if applied <= layer), default=len(layers) - 1) + 1


def rescaled_layers(layers: Sequence[int], depth: int, kept: int) -> tuple[int, ...]:
    """Output layers of a `depth`-layer stack for a forward of its first `kept` layers: layer i -> the kept
    layer `max(1, floor((i + 1) kept / depth)) - 1`, so every output keeps its relative depth (stage ends of
    12 layers (2, 5, 8, 11) become (0, 2, 3, 5) at 6) and the last layer stays the last; also for kept > depth
    (reViT run deeper than it was built)."""
    return tuple(max(1, (i + 1) * kept // depth) - 1 for i in layers)


def layer_reads(layers: Sequence[int], depth: int, kept: int) -> dict[int, tuple[int, ...]]:
    """For a forward of `kept` of `depth` layers: {layer run: the requested `layers` read after it}, each requested
    layer at its `rescaled_layers` layer when fewer (or more) layers run."""
    targets = layers if kept == depth else rescaled_layers(layers, depth, kept)
    reads: dict[int, tuple[int, ...]] = {}
    for i, t in zip(layers, targets):
        reads[t] = (*reads.get(t, ()), i)
    return reads


def step_work(block: Block, tokens: int, layout: Windows | Global | None, share: float = 1.0) -> BlockWork:
    """One application of `block` over all `tokens` of a `share` of the images (per image)."""
    pairs = tokens * tokens if layout is None else layout.pairs()
    rel_queries, rel_keys = (0.0, 0.0) if layout is None else layout.rel_pos_work()
    return block.work(tokens * share, tokens * share, attn_pairs=pairs * share, rel_pos=(rel_queries * share, rel_keys))


class ScheduleCache:
    """A model's schedules, reads and derived plans by key (plain data: settings, grids, knob values, steps):
    `get(key, make)` makes a value once (at most `size` are kept, then the cache starts over). A key holds every
    knob its value depends on, so changing a knob (or the training mode) only selects other entries. While
    compiling or exporting nothing is cached (the grid may be symbolic)."""

    def __init__(self, size: int = 256) -> None:
        self.size, self.values = size, {}

    def get(self, key: Any, make: Callable[[], Any]) -> Any:
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


class Schedules:
    """The schedule half of `ViTBackbone` (a mixin of it): the steps of a forward at a setting, the layers it reads,
    the FLOP plan derived from them, and the compute knob's choice among settings (`compute.py`).

    A method says what its settings are -- `own_setting` (the forward without the knob; None: the full schedule),
    `compute_settings(grid)` (the knob's candidates, smallest first) and, when its steps are not the first K layers,
    `step_layers(setting)` -- and what a forward that ran some steps computed, `work(steps, setting, grid)`; the
    schedules and plans are built here once per key (`ScheduleCache`)."""

    own_setting: Any = None
    static_schedule = False  # True: a setting changes only the tokens of each step, never the steps

    def step_layers(self, setting: Any) -> Sequence[tuple[int, int]]:
        """(step index, layer) of every block application of a forward at `setting`, in execution order (None: the
        full forward). The base: the first K layers, K = `setting` (None: all)."""
        return [(t, t) for t in range(self._depth if setting is None else setting)]

    def global_layers_at(self, setting: Any) -> Sequence[int]:
        """The layers with global attention when windowed, for a forward at `setting` (the model's `global_layers`)."""
        return self.global_layers

    def layout(
        self, step: int, grid: tuple[int, int], layer: int | None = None, global_layers: Sequence[int] | None = None
    ) -> Windows | Global | None:
        """The attention layout of application `step` (running `layer`, default `step`) on a `grid` input: its
        windows, or for global attention a `Global` with relative position biases and None without. Global:
        the `global_steps` when set, else the steps whose layer is one of `global_layers` (default the model's)."""
        if self.global_steps is not None:
            windowed = step not in self.global_steps
        else:
            layers = self.global_layers if global_layers is None else global_layers
            windowed = (step if layer is None else layer) not in layers
        if self.window_size and windowed:
            return Windows(grid, self.window_size, self.num_prefix_tokens)
        return Global(grid, self.num_prefix_tokens) if self.use_rel_pos else None

    def steps(self, setting: Any, grid: tuple[int, int]) -> tuple[Step, ...]:
        """The schedule of a forward at `setting` on a `grid` input, built once per key (the setting, the grid and
        every knob the steps depend on: training mode, window size, global steps, depth)."""
        setting = None if self.static_schedule else setting
        key = ('steps', setting, grid, self.training, self.window_size, self.global_steps, self._depth)
        return self._schedules.get(key, lambda: self.build_steps(setting, grid))

    def build_steps(self, setting: Any, grid: tuple[int, int]) -> tuple[Step, ...]:
        """The steps of `steps` (uncached): each (index, layer) of `step_layers`, its layer's block, its layout and
        its stochastic-depth rate in training."""
        global_layers, rates = self.global_layers_at(setting), self.drop_path_rates if self.training else None
        blocks, layer_blocks, pairs = self.blocks, self.layer_blocks, list(self.step_layers(setting))
        if self.kept_layers < self._depth:  # pruned at build (`pruning.py`): the layers after are not owned
            pairs = pairs[: reach([layer for _, layer in pairs], self.kept_layers - 1)]
        return tuple(
            Step(
                t,
                layer,
                blocks[layer_blocks[layer]],
                self.layout(t, grid, layer, global_layers),
                rates[t] if rates else 0.0,
            )
            for t, layer in pairs
        )

    def layer_reads(
        self, setting: Any, grid: tuple[int, int], layers: tuple[int, ...]
    ) -> tuple[tuple[Step, ...], dict[int, tuple[int, ...]]]:
        """The steps a forward at `setting` that returns `layers` runs (its schedule up to the last layer it reads)
        and {layer: the requested layers read after it} (rescaled when the setting runs fewer layers), cached."""

        def make() -> tuple[tuple[Step, ...], dict[int, tuple[int, ...]]]:
            full = self.steps(setting, grid)
            ran = max(layer for _, layer in self.step_layers(None if self.static_schedule else setting)) + 1
            reads = layer_reads(layers, self._depth, ran)  # the layers this setting runs (unpruned: its own reads)
            steps = through(full, max(reads))
            last = {step.layer: t for t, step in enumerate(steps)}  # a layer's state is read after its last application
            read = [step.layer in reads and last[step.layer] == t for t, step in enumerate(steps)]
            return tuple(step._replace(read=True) if r else step for step, r in zip(steps, read)), reads

        key = ('reads', None if self.static_schedule else setting, grid, layers)
        return self._schedules.get(key + (self.training, self.window_size, self.global_steps, self._depth), make)

    # ---- the FLOP plan, derived ---------------------------------------------------------------------------
    def work(self, steps: tuple[Step, ...], setting: Any, grid: tuple[int, int]) -> list[Work]:
        """What a forward that ran `steps` at `setting` on a `grid` input computed, per image, in execution order
        (`flops.py`). The base: each step's block over every token."""
        tokens = grid[0] * grid[1] + self.num_prefix_tokens
        return [step_work(step.block, tokens, step.layout) for step in steps]

    def plan(self, setting: Any, grid: tuple[int, int], steps: tuple[Step, ...] | None = None) -> Plan:
        """The FLOP plan of a forward at `setting` (None: the full forward, every step over every token) that ran
        `steps` (default: its whole schedule), derived from them by `work` (cached)."""
        steps = self.steps(setting, grid) if steps is None else steps
        return self._schedules.get(
            ('plan', steps, setting, grid), lambda: Plan(steps, tuple(self.work(steps, setting, grid)))
        )

    def embed_work(self, grid: tuple[int, int]) -> OpWork:
        """The patch embedding's work on a `grid` input (cached)."""
        return self._schedules.get(('embed', grid), lambda: conv_work('patch_embed', self.patch_embed.proj, grid))

    def counted(self, steps: tuple[Step, ...], setting: Any, grid: tuple[int, int]) -> tuple[OpWork, Plan]:
        """A forward's count (`ForwardStats.count`): the patch embedding's work and the plan of the steps it ran."""
        return self.embed_work(grid), self.plan(setting, grid, steps)

    def plan_flops(self, setting: Any, grid: tuple[int, int]) -> float:
        """FLOPs per image of the forward at `setting` (None: full depth): its plan and the patch embedding."""
        return self.embed_work(grid).flops + total_flops(self.plan(setting, grid).work())

    # ---- the compute knob -----------------------------------------------------------------------------------
    def compute_settings(self, grid: tuple[int, int]) -> Sequence[Any]:
        """The compute knob's candidates on a `grid` input, smallest first, the last the forward without the knob.
        The base: the first K of the L layers, K = 1..L."""
        return range(1, self._depth + 1)

    def setting_within(self, fraction: float, grid: tuple[int, int]) -> Any:
        """The setting of a forward with the compute knob at `fraction`: the largest candidate within it."""
        return self.within(fraction, grid, self.compute_settings(grid))

    def within(self, fraction: float, grid: tuple[int, int], candidates: Sequence[Any]) -> Any:
        """The largest of `candidates` (smallest first) whose plan's FLOPs are <= `fraction` x the full-depth plan's,
        or the smallest (`compute.py`)."""
        flops = lambda i: self.plan_flops(candidates[i], grid)  # noqa: E731
        return candidates[largest_within(fraction, self.plan_flops(None, grid), flops, len(candidates))]
