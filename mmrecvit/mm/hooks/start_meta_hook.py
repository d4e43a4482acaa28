"""`StartMetaHook`: the top-1 a classification run measured, in its last checkpoint's meta (issue 45)."""

from __future__ import annotations

import os.path as osp
from typing import Any

from mmengine.dist import is_main_process
from mmengine.hooks import Hook

from ..start_meta import write_start_meta


class StartMetaHook(Hook):
    """Write the last validation's `metric` into the last checkpoint's `meta['mmrecvit_start']`.

    A start checkpoint (configs/_base_/backbones/*_in1k.py) is then a start whose quality a comparison can print
    (tools/analysis_tools/compare.py): `imagenet_top1` (%, as the evaluator gives it), `val_images` and the
    `val_dataset` it was measured on, and the `config` that made it. mmengine saves a checkpoint at the end of an
    epoch, before that epoch's validation: after the run (`after_train`, the last validation done) the file that
    `work_dir/last_checkpoint` names gets the figure of the model it holds.

        custom_hooks = [..., dict(type='StartMetaHook')]
    """

    priority = 'LOWEST'

    def __init__(self, metric: str = 'accuracy/top1') -> None:
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"StartMetaHook metric must be a metric name such as 'accuracy/top1', got {metric!r}")
        self.metric = metric
        self.measured: dict[str, Any] | None = None

    def after_val_epoch(self, runner, metrics: dict[str, float] | None = None) -> None:
        if metrics is None or self.metric not in metrics:
            raise KeyError(f'StartMetaHook: the validation gave no {self.metric!r}; it gave {sorted(metrics or {})}')
        dataset = runner.val_dataloader.dataset
        self.measured = dict(
            imagenet_top1=float(metrics[self.metric]),
            val_images=len(dataset),
            val_dataset=type(dataset).__name__,
            config=osp.basename(runner.cfg.filename or ''),
        )

    def after_train(self, runner) -> None:
        pointer = osp.join(runner.work_dir, 'last_checkpoint')
        if self.measured is None or not is_main_process() or not osp.isfile(pointer):
            return
        with open(pointer) as f:
            write_start_meta(f.read().strip(), **self.measured)
