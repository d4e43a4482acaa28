"""`RecViTRCNN`: detectron2's `GeneralizedRCNN` (Mask R-CNN, Cascade Mask R-CNN) with our backbones'
auxiliary losses and statistics.

detectron2's trainers sum every entry of the loss dict a model returns and log the `EventStorage`.
So during the detector's own training forward each mmrecvit backbone's statistics are read from its
result (`adapters.StatsCollector`), its `stats.aux_losses` (already weighted, `loss_*`) join the loss dict,
and its `stats.scalars` (mean depth, fractions, ...) go to the storage with `put_scalars`: logged, not
summed (the mm path's `RecursionHook` does the same for mmengine), read to the host in one transfer with the
backbones' deferred finiteness checks (`numerics.check_finite`: a `NonFiniteError` there names the forward that
failed; detectron2's trainer reads its losses itself, one `.item()` each). `temperature_schedule` anneals a backbone
temperature (Edge-RecViT's `gumbel_tau`) by the storage's iteration before each training forward, as the mm
path's `TemperatureScheduleHook`: in the model, because a LazyConfig names no trainer hooks (detectron2's own
`lazyconfig_train_net.py` runs it too).
"""

from __future__ import annotations

from typing import Any

from detectron2.modeling import META_ARCH_REGISTRY, GeneralizedRCNN
from detectron2.utils.events import get_event_storage

from ..adapters import StatsCollector, TemperatureSchedule
from ..models.numerics import check_finite


@META_ARCH_REGISTRY.register()
class RecViTRCNN(GeneralizedRCNN):
    """`GeneralizedRCNN` whose training forward also returns the backbones' auxiliary losses.

    Args:
        temperature_schedule: `TemperatureSchedule` arguments plus `max_iter` (the run's iterations, e.g.
            '${train.max_iter}'), or None.
        **kwargs: `GeneralizedRCNN`'s.
    """

    def __init__(self, *, temperature_schedule: dict | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        schedule = dict(temperature_schedule or {})
        self.max_iter = schedule.pop('max_iter', None)
        if temperature_schedule is not None and not isinstance(self.max_iter, int):
            raise ValueError(
                f"RecViTRCNN temperature_schedule needs max_iter (the run's iterations), got {self.max_iter!r}"
            )
        self.temperature = (
            TemperatureSchedule(**schedule, owner='RecViTRCNN temperature_schedule') if schedule else None
        )
        if self.temperature is not None:
            self.temperature.apply(self, 0, self.max_iter)  # a backbone without the attribute fails here

    def forward(self, batched_inputs: list[dict[str, Any]]) -> Any:
        if not self.training:
            return super().forward(batched_inputs)
        if self.temperature is not None:
            storage = get_event_storage()
            storage.put_scalar(self.temperature.attribute, self.temperature.apply(self, storage.iter, self.max_iter))
        with StatsCollector(self) as collector:
            out = super().forward(batched_inputs)
            losses, scalars = collector.terms()
        clash = sorted(set(losses) & set(out))
        if clash:
            raise KeyError(f'RecViTRCNN: the detector already returns losses named {clash}')
        out.update(losses)
        values = check_finite(self, list(scalars.values()))  # one transfer: the statistics and the deferred checks
        if scalars:
            get_event_storage().put_scalars(**dict(zip(scalars, values.tolist())))  # host memory: no wait
        return out
