"""The one description of a forward: which block runs at each step, on how many tokens, which states are outputs.

Every backbone describes what a forward does at a setting as a `Plan` (`ViTBackbone.plan`): the
forward runs it step by step, the FLOP model counts it (`Plan.work`, the entries `ForwardStats.work`
holds) and the compute knob compares the plans of the candidate settings (`compute.py`). Nothing
describes the forward a second time, so a change of the forward is a change of its plan, which the
FLOP counts and the knob then follow.

A `Step` is one block application; its `work` is the counted `BlockWork` of that application (per
image; the token-adaptive methods fill it from the counts their routers decided), and `before` /
`after` hold the other work done around it (routers, step transforms). A method that needs more to run
a step (SR-ViT's unit and recursion, MoR-ViT's tokens kept, reViT's image groups) subclasses `Step`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from torch import Tensor, nn

from .flops import BlockWork, OpWork, Work
from .layers import Block
from .numerics import FiniteGuard, sanitize
from .stats import ForwardStats
from .windows import Global, Windows


@dataclass(frozen=True)
class Step:
    """One block application of a forward.

    index: t, the application step (stochastic depth, window layout and checkpointing follow it).
    layer: the layer it applies (0..depth-1); `out_indices` name layers (`ViTBackbone`'s vocabulary).
    block: which of the model's unique blocks runs (an index into `blocks`).
    work: what it computes, per image (`flops.BlockWork`).
    windows: its attention layout (`windows.Windows`; `windows.Global` for a global step with relative position
        biases), None for plain global attention.
    drop_path_rate: its stochastic-depth rate.
    before, after: other work just before / after it (routers, step transforms).
    """

    index: int
    layer: int
    block: int
    work: BlockWork
    windows: Windows | Global | None = None
    drop_path_rate: float = 0.0
    before: tuple[OpWork, ...] = ()
    after: tuple[OpWork, ...] = ()


@dataclass(frozen=True)
class Plan:
    """A forward at one setting.

    steps: the block applications, in execution order.
    outputs: for each requested output, the position in `steps` after which its state is read.
    final: the position of the step whose state is the model's final one (the final norm applies to it).
    head: work before the first step (a ranker), tail: work after the steps or once per batch (reViT's
        expert merge), both per image. The patch embedding is the backbone's and counted by it.
    """

    steps: tuple[Step, ...]
    outputs: tuple[int, ...]
    final: int
    head: tuple[OpWork, ...] = ()
    tail: tuple[OpWork, ...] = field(default=())

    def work(self) -> list[Work]:
        """Every entry of the forward's work, in execution order (`flops.py`)."""
        entries: list[Work] = list(self.head)
        for step in self.steps:
            entries += [*step.before, step.work, *step.after]
        return entries + list(self.tail)

    def reads(self, position: int) -> list[int]:
        """The outputs read right after the step at `position`."""
        return [j for j, p in enumerate(self.outputs) if p == position]

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def until_outputs(self) -> Plan:
        """The plan without the steps after its last output: a forward runs no further than what it returns
        (`final` keeps its position; when it is cut, no output gets the final norm)."""
        last = max(self.outputs)
        return self if last == len(self.steps) - 1 else replace(self, steps=self.steps[: last + 1])


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


@dataclass
class Forward:
    """The state of one forward, passed along it (never kept on the module, so forwards are re-entrant):
    its patch grid, the compute fraction in force, the finiteness checks, the plan run and its statistics."""

    grid: tuple[int, int]
    compute: float | None = None
    guard: FiniteGuard | None = None
    plan: Plan | None = None
    stats: ForwardStats | None = None

    def __post_init__(self) -> None:
        if self.stats is None:  # not a default_factory: torch.compile cannot trace that call
            self.stats = ForwardStats({}, {}, {}, {}, [], self.grid)

    def finite(self, name: str, where: str | Sequence[str], value: Tensor, source: nn.Module | None = None) -> Tensor:
        """Router logits (or another tensor that must stay finite) -> the tensor to use (`numerics.FiniteGuard`):
        NaN/inf are replaced by 0 and reported at the end of the forward, naming `name` and `where`."""
        return sanitize(value) if self.guard is None else self.guard(name, where, value, source)
