"""Per-forward statistics every backbone reports (SPEC §5, STYLE 8), travelling with the forward's result.

Each forward builds its own `ForwardStats` and hands it back with what it computed: `forward` returns a
`FeatureMaps` tuple whose `.stats` it is, `forward_intermediates(..., return_stats=True)` returns it beside
the result. Nothing is kept on the module, so two forwards never overwrite each other's numbers; logging (the
training hooks), FLOP counting and the depth-map tool all read these same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import Tensor
from torch.utils._pytree import register_pytree_node

from .flops import BlockWork, Work, total_flops


@dataclass
class ForwardStats:
    """What one forward of a backbone did.

    aux_losses: weighted auxiliary losses (scalar tensors with graph) to add to the task loss,
        named `loss_<what>` so mmengine sums and logs them.
    scalars: detached numbers for the training log (mean depth, fractions, gate values ...).
    token_maps: per-token tensors for visualisation, each (B, ..., h, w) on the patch grid, e.g.
        `depth` (B, h, w) or `mixture/unit0` (B, T, h, w) (a method's loop stores them as (B, ..., h*w)
        over the patch tokens, no CLS; `ViTBackbone.forward_intermediates` reshapes).
    tables: other per-forward tensors for tools that are not per token, e.g. reViT's gates `gates` (L, E).
    grid: the patch grid (h, w) of this forward.
    plan: the `plan.Plan` of what the forward ran (cached by the backbone, shared by forwards alike); None, and
        `extra` empty, in a forward torch.compile traces (the FLOP model is an eager forward's).
    extra: work outside the plan, per image: the patch embedding first, then what only this forward did
        (reViT's expert merges when they were not cached).
    """

    aux_losses: dict[str, Tensor] = field(default_factory=dict)
    scalars: dict[str, Tensor] = field(default_factory=dict)
    token_maps: dict[str, Tensor] = field(default_factory=dict)
    tables: dict[str, Tensor] = field(default_factory=dict)
    grid: tuple[int, int] = (0, 0)
    plan: Any = None
    extra: list[Work] = field(default_factory=list)

    @property
    def work(self) -> list[Work]:
        """What the forward computed, in execution order (`flops.py`): one `BlockWork` per block application and
        an `OpWork` per other computation (patch embedding, routers, ...)."""
        steps = [] if self.plan is None else self.plan.work()
        return self.extra[:1] + steps + self.extra[1:]

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
