"""Per-forward statistics every backbone reports (docs/methods/README.md), travelling with the forward's result.

Each forward builds its own `ForwardStats` and hands it back with what it computed: `forward` returns a
`FeatureMaps` tuple whose `.stats` it is, `forward_intermediates(..., return_stats=True)` returns it beside
the result. Nothing is kept on the module, so two forwards never overwrite each other's numbers; logging (the
training hooks), FLOP counting and the depth-map tool all read these same numbers. The FLOP count is derived from
what the forward ran only when it is read (`schedule.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor
from torch.utils._pytree import register_pytree_node

from .flops import BlockWork, OpWork, Work, total_flops


@dataclass
class ForwardStats:
    """What one forward of a backbone did.

    aux_losses: weighted auxiliary losses (scalar tensors with graph) to add to the task loss,
        named `loss_<what>` so mmengine sums and logs them.
    scalars: detached numbers for the training log (mean depth, fractions, gate values ...).
    token_maps: per-token tensors for visualisation, each (B, ..., h, w) on the patch grid, e.g.
        `depth` (B, h, w) or `mixture/unit0` (B, T, h, w) (a method's loop stores them as (B, ..., h*w)
        over the patch tokens, no CLS; `ViTBackbone.forward_states` reshapes).
    tables: other per-forward tensors for tools that are not per token, e.g. reViT's gates `gates` (L, E).
    grid: the patch grid (h, w) of this forward.
    setting: what the forward ran at, as its method counts it: the compute knob's choice or the method's own setting
        (layers, recursions per unit, capacities), or what its routers decided (the tokens of each step).
    extra: work outside the schedule that only this forward did, per image (reViT's router and expert merges when
        they were not cached).
    count: how the FLOP model counts the forward (set by the backbone: its steps and setting, derived when read);
        None in a forward torch.compile traces (the FLOP model is an eager forward's).
    """

    aux_losses: dict[str, Tensor] = field(default_factory=dict)
    scalars: dict[str, Tensor] = field(default_factory=dict)
    token_maps: dict[str, Tensor] = field(default_factory=dict)
    tables: dict[str, Tensor] = field(default_factory=dict)
    grid: tuple[int, int] = (0, 0)
    setting: Any = None
    extra: list[Work] = field(default_factory=list)
    count: Callable[[], tuple[OpWork, Any]] | None = field(default=None, repr=False, compare=False)
    _counted: tuple[OpWork, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def _derived(self) -> tuple[OpWork, Any] | None:
        if self._counted is None and self.count is not None:
            self._counted = self.count()  # the patch embedding's work and the `schedule.Plan`, derived once
        return self._counted

    @property
    def plan(self) -> Any:
        """The `schedule.Plan` of what the forward ran (derived from its schedule when first read; None when
        compiled)."""
        counted = self._derived()
        return None if counted is None else counted[1]

    @property
    def work(self) -> list[Work]:
        """What the forward computed, in execution order (`flops.py`): the patch embedding, one `BlockWork` per
        block application and an `OpWork` per other computation (routers, ...)."""
        counted = self._derived()
        return [] if counted is None else [counted[0], *counted[1].work(), *self.extra]

    @property
    def blocks(self) -> list[BlockWork]:
        """The block applications, in execution order."""
        return [w for w in self.work if isinstance(w, BlockWork)]

    @property
    def flops(self) -> float:
        """Analytic FLOPs per image of the whole forward (2 x MACs, `flops.py`)."""
        return total_flops(self.work)


class FeatureMaps(tuple):
    """A backbone's outputs, a plain tuple of tensors to every framework (mmdet's necks, mmseg's heads index
    it), with the forward's statistics in `stats`: how the auxiliary losses reach the adapters
    (`mmrecvit.adapters.StatsCollector`). A pytree node (as transformers' `ModelOutput`), so what walks a
    module's outputs (torch's module tracker, `FlopCounterMode`, DDP) sees the tensors in it."""

    stats: ForwardStats

    def __new__(cls, outputs: Any, stats: ForwardStats) -> FeatureMaps:
        self = super().__new__(cls, outputs)
        self.stats = stats
        return self

    def __reduce__(self) -> Any:  # pickles (and deep-copies) as the plain tuple it is to the frameworks
        return tuple, (tuple(self),)


register_pytree_node(
    FeatureMaps,
    lambda maps: (list(maps), maps.stats),
    lambda children, stats: FeatureMaps(children, stats),
    serialized_type_name='mmrecvit.models.stats.FeatureMaps',
)
