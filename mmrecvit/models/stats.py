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

from .flops import BlockWork, Work, total_flops


@dataclass
class ForwardStats:
    """What one forward of a backbone did.

    aux_losses: weighted auxiliary losses (scalar tensors with graph) to add to the task loss,
        named `loss_<what>` so mmengine sums and logs them.
    scalars: detached numbers for the training log (mean depth, fractions, gate values ...).
    token_maps: per-token tensors for visualisation, each (B, ..., h, w) on the patch grid, e.g.
        `depth` (B, h, w) or `mixture/unit0` (B, T, h, w). A backbone's `forward_states` stores
        them as (B, ..., h*w) over the patch tokens (no CLS); `forward_intermediates` reshapes.
    tables: other per-forward tensors for tools that are not per token, e.g. reViT's gates
        `gates` (L, E).
    work: what the forward computed, in execution order (`flops.py`): one `BlockWork` per block
        application and an `OpWork` per other computation (patch embedding, routers, ...).
    grid: the patch grid (h, w) of this forward.
    """

    aux_losses: dict[str, Tensor] = field(default_factory=dict)
    scalars: dict[str, Tensor] = field(default_factory=dict)
    token_maps: dict[str, Tensor] = field(default_factory=dict)
    tables: dict[str, Tensor] = field(default_factory=dict)
    work: list[Work] = field(default_factory=list)
    grid: tuple[int, int] = (0, 0)

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
    (`mmrecvit.adapters.collect_stats`)."""

    stats: ForwardStats

    def __new__(cls, outputs: Any, stats: ForwardStats) -> FeatureMaps:
        self = super().__new__(cls, outputs)
        self.stats = stats
        return self

    def __reduce__(self) -> Any:  # pickles (and deep-copies) as the plain tuple it is to the frameworks
        return tuple, (tuple(self),)
