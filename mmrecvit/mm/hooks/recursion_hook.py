"""`RecursionHook`: our backbones' auxiliary losses and statistics in the model's loss dict.

mmdet's detectors, mmseg's segmentors and mmpretrain's classifiers build their loss dict in `loss()` from
their heads only. Each backbone forward returns its statistics with its outputs (`FeatureMaps.stats`), so
before training starts this hook registers torch forward hooks (`adapters.StatsCollector`) that read them
from every mmrecvit backbone's output, and one forward hook on the model that adds them to the loss dict of
each `mode='loss'` forward: the `stats.aux_losses` (`loss_*`, summed into the total loss by mmengine) and
`stats.scalars` (logged, not summed). They then appear by name in the standard training log, for any
detector or segmentor, with no user code (our configs list the hook in `custom_hooks`); nothing of the model
is replaced. Each training iteration is named in a backbone's `NonFiniteError` (NaN/inf router logits or
aux losses, `mmrecvit.models.numerics.forward_label`).

After the optimizer step the hook reads the iteration's log values (the loss dict's tensors: the heads' losses, our
aux losses and statistics) and the backbones' deferred finiteness checks to the host in one transfer
(`numerics.check_finite`) and puts them back as CPU tensors, so mmengine's `RuntimeInfoHook` (and any hook that reads
the log as tensors) reads host memory instead of one device tensor per key (`.item()`: one sync each), and a
`NonFiniteError` ends the run in the iteration that failed, before the checkpoint hooks save it. Hence the hook's
priority: before `RuntimeInfoHook` ('VERY_HIGH').
"""

from __future__ import annotations

from typing import Any

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from torch import Tensor

from ...adapters import StatsCollector
from ...models.numerics import check_finite, forward_label


class RecursionHook(Hook):
    """Add mmrecvit backbones' aux losses and statistics to the model's loss dict (module docstring)."""

    priority = 'HIGHEST'  # after_train_iter reads the log's tensors before RuntimeInfoHook ('VERY_HIGH') does

    def __init__(self) -> None:
        self._collector: StatsCollector | None = None
        self._handles: list = []
        self._label = None

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        collector = StatsCollector(model)
        if not collector.backbones or self._collector is not None:
            collector.remove()
            return
        self._collector = collector
        self._handles = [
            model.register_forward_pre_hook(lambda module, args: collector.clear()),
            model.register_forward_hook(self._add_terms, with_kwargs=True),
        ]

    def _add_terms(self, model: Any, args: tuple, kwargs: dict, output: Any) -> Any:
        losses, scalars = self._collector.terms()
        mode = kwargs.get('mode', args[2] if len(args) > 2 else None)
        if mode != 'loss' or not isinstance(output, dict):
            return None
        for k, v in {**losses, **scalars}.items():
            if k in output:
                raise KeyError(f'RecursionHook: the model already returns a loss named {k!r}')
            output[k] = v
        return output

    def before_train_iter(self, runner, batch_idx: int, data_batch: Any = None) -> None:
        self._label = forward_label.set(f'training iteration {runner.iter + 1}')

    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        try:
            if self._collector is not None:
                model = runner.model.module if is_model_wrapper(runner.model) else runner.model
                logged = (
                    {k: v for k, v in outputs.items() if isinstance(v, Tensor) and v.numel() == 1} if outputs else {}
                )
                values = check_finite(model, list(logged.values()))  # the one transfer
                if logged:
                    outputs.update(
                        zip(logged, values.unbind())
                    )  # host tensors: RuntimeInfoHook's reads wait for nothing
        finally:
            if self._label is not None:
                forward_label.reset(self._label)
                self._label = None

    def after_train(self, runner) -> None:
        for handle in self._handles:
            handle.remove()
        if self._collector is not None:
            self._collector.remove()
        self._collector, self._handles = None, []
