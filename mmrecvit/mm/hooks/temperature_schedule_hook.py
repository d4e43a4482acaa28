"""`TemperatureScheduleHook`: a backbone temperature (Edge-RecViT's Gumbel-softmax `gumbel_tau`)
annealed over training."""

from __future__ import annotations

import math
from typing import Any

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from ...models import ViTBackbone
from ...models.checks import check_choice, check_float, check_int


class TemperatureScheduleHook(Hook):
    """Anneal a backbone temperature over training: Edge-RecViT's Gumbel-softmax `gumbel_tau`.

    tau goes from `start` to `end` over the training iterations [`begin`, `stop`) (default: the
    whole run) and stays at `end` afterwards, with `schedule` 'cosine', 'linear' or 'exp'
    (geometric). Before each training iteration the attribute is set on every mmrecvit backbone
    that has it, and logged as `train/<attribute>`. The value is a function of the iteration, so a
    resumed run continues the schedule exactly.

        custom_hooks = [..., dict(type='TemperatureScheduleHook', start=1.0, end=0.1)]
    """

    priority = 'NORMAL'
    SCHEDULES = ('cosine', 'linear', 'exp')

    def __init__(
        self,
        start: float = 1.0,
        end: float = 0.1,
        begin: int = 0,
        stop: int | None = None,
        schedule: str = 'cosine',
        attribute: str = 'gumbel_tau',
    ) -> None:
        name = 'TemperatureScheduleHook'
        start = check_float(f'{name} start', start, 0.0, math.inf, low_open=True)
        end = check_float(f'{name} end', end, 0.0, math.inf, low_open=True)
        check_choice(f'{name} schedule', schedule, self.SCHEDULES)
        check_int(f'{name} begin', begin, 0)
        if stop is not None:
            check_int(f'{name} stop', stop, begin + 1)
        self.start, self.end, self.begin, self.stop = float(start), float(end), begin, stop
        self.schedule, self.attribute = schedule, attribute

    def value_at(self, iteration: int, max_iters: int) -> float:
        stop = self.stop if self.stop is not None else max_iters
        t = min(max((iteration - self.begin) / max(stop - self.begin, 1), 0.0), 1.0)
        if self.schedule == 'linear':
            return self.start + (self.end - self.start) * t
        if self.schedule == 'exp':
            return self.start * (self.end / self.start) ** t
        return self.end + (self.start - self.end) * 0.5 * (1 + math.cos(math.pi * t))

    def before_train_iter(self, runner, batch_idx: int, data_batch: Any = None) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        targets = [m for m in model.modules() if isinstance(m, ViTBackbone) and hasattr(m, self.attribute)]
        if not targets:
            raise AttributeError(f'TemperatureScheduleHook: no mmrecvit backbone of the model has {self.attribute!r}')
        value = self.value_at(runner.iter, runner.max_iters)
        for m in targets:
            setattr(m, self.attribute, value)
        runner.message_hub.update_scalar(f'train/{self.attribute}', value)
