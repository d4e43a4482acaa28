"""`RecViTRCNN`: detectron2's `GeneralizedRCNN` (Mask R-CNN, Cascade Mask R-CNN) with our backbones'
auxiliary losses and statistics.

detectron2's trainers sum every entry of the loss dict a model returns and log the `EventStorage`.
So during the detector's own training forward each mmrecvit backbone's statistics are read from its
result (`adapters.StatsCollector`), its `stats.aux_losses` (already weighted, `loss_*`) join the loss dict,
and its `stats.scalars` (mean depth, fractions, ...) go to the storage with `put_scalars`: logged, not
summed (the mm path's `RecursionHook` does the same for mmengine).
"""

from __future__ import annotations

from typing import Any

import torch
from detectron2.modeling import META_ARCH_REGISTRY, GeneralizedRCNN
from detectron2.utils.events import get_event_storage

from ..adapters import StatsCollector


@META_ARCH_REGISTRY.register()
class RecViTRCNN(GeneralizedRCNN):
    """`GeneralizedRCNN` whose training forward also returns the backbones' auxiliary losses."""

    def forward(self, batched_inputs: list[dict[str, Any]]) -> Any:
        if not self.training:
            return super().forward(batched_inputs)
        with StatsCollector(self) as collector:
            out = super().forward(batched_inputs)
            losses, scalars = collector.terms()
        clash = sorted(set(losses) & set(out))
        if clash:
            raise KeyError(f'RecViTRCNN: the detector already returns losses named {clash}')
        out.update(losses)
        if scalars:
            values = torch.stack([v.float().reshape(()) for v in scalars.values()]).tolist()  # one host sync
            get_event_storage().put_scalars(**dict(zip(scalars, values)))
        return out
