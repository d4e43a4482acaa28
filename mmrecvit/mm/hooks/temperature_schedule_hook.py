"""`TemperatureScheduleHook`: a backbone temperature (Edge-RecViT's depth-draw temperature `gumbel_tau`)
annealed over training, and written into every checkpoint's meta."""

from __future__ import annotations

from typing import Any

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from ...adapters import TemperatureSchedule
from ..start_meta import update_start_meta


class TemperatureScheduleHook(Hook):
    """Anneal a backbone temperature over training: Edge-RecViT's depth-draw temperature `gumbel_tau`.

    tau goes from `start` to `end` over the training iterations [`begin`, `stop`) (default: the
    whole run) and stays at `end` afterwards, with `schedule` 'cosine', 'linear' or 'exp'
    (geometric): `mmrecvit.adapters.TemperatureSchedule`, which detectron2's `RecViTRCNN` runs too.
    Before each training iteration the attribute is set on every mmrecvit backbone that has it, and
    logged as `train/<attribute>`. The value is a function of the iteration, so a resumed run
    continues the schedule exactly. Edge-RecViT draws its training depths from the tempered categorical
    softmax(z / tau) (Gumbel-max on z / tau, not the Gumbel-softmax relaxation softmax((z + g) / tau)): tau -> 0
    trains on the argmax depths eval runs (docs/methods/edge_recvit.md). Each checkpoint's
    `meta['mmrecvit_start']['gumbel_tau']` holds the value the next iteration would use (the last run's end value
    in its last checkpoint), so a dense recipe that starts from it can continue it (configs/_base_/backbones/).

        custom_hooks = [..., dict(type='TemperatureScheduleHook', start=1.0, end=0.1)]
    """

    priority = 'NORMAL'
    SCHEDULES = TemperatureSchedule.SCHEDULES

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """`TemperatureSchedule`'s arguments: start=1.0, end=0.1, begin=0, stop=None, schedule='cosine',
        attribute='gumbel_tau'."""
        self.schedule = TemperatureSchedule(*args, **kwargs, owner='TemperatureScheduleHook')

    def value_at(self, iteration: int, max_iters: int) -> float:
        return self.schedule.value_at(iteration, max_iters)

    def before_train_iter(self, runner, batch_idx: int, data_batch: Any = None) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        value = self.schedule.apply(model, runner.iter, runner.max_iters)
        runner.message_hub.update_scalar(f'train/{self.schedule.attribute}', value)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        value = self.schedule.value_at(runner.iter, runner.max_iters)
        update_start_meta(checkpoint, **{self.schedule.attribute: value})
