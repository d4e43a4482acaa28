"""A training log a reader can follow, for the Runners our tools build (`cli.build_runner`; issue 41.4).

* `fit_log_interval(cfg)`: an iteration-based run logs at least 10 times, so a short run
  (`--cfg-options train_cfg.max_iters=10`) shows its losses and eta from the first iterations instead of one line
  at the end (the toy configs log every 10 iterations).
* `ParamwiseOptionsAtDebug`: mmengine's optimizer constructor logs one `paramwise_options -- <param>:<key>=<value>`
  line per parameter a `custom_keys` entry matches (66 lines for a toy UperNet); they go to log_level='DEBUG'
  after one INFO line saying so.

* `IoUMetricInUse` (`metrics.py`) for mmseg's `IoUMetric`: the per-class table lists the classes in use.

`readable_config(cfg)` makes the config changes, `readable_logger(runner.logger)` the logger's. Third-party
warnings that carry nothing for a user: `mmrecvit.mm.compat`.
"""

from __future__ import annotations

import logging
from typing import Any

PARAMWISE = 'paramwise_options -- '  # how mmengine's DefaultOptimWrapperConstructor starts each per-parameter line
MIN_LOG_LINES = 10


def fit_log_interval(cfg: Any) -> None:
    """Lower the logger hook's interval to max_iters // MIN_LOG_LINES (at least 1) for an iteration-based run."""
    logger = (cfg.get('default_hooks') or {}).get('logger')
    train_cfg = cfg.get('train_cfg') or {}
    max_iters = train_cfg.get('max_iters')
    if (
        logger is None
        or not isinstance(max_iters, int)
        or train_cfg.get('type', 'IterBasedTrainLoop') != ('IterBasedTrainLoop')
    ):
        return
    logger['interval'] = max(1, min(logger.get('interval', 10), max_iters // MIN_LOG_LINES))


class ParamwiseOptionsAtDebug(logging.Filter):
    """On a logger: mmengine's per-parameter `paramwise_options` lines at DEBUG, after one INFO line."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO and str(record.msg).startswith(PARAMWISE):
            if not self.seen:
                self.seen = True
                record.msg = (
                    "paramwise_options: the options mmengine's custom_keys set per parameter (weight decay, lr "
                    "multipliers) are listed at log_level='DEBUG'"
                )
                return True
            record.levelno, record.levelname = logging.DEBUG, 'DEBUG'  # the handlers' INFO level drops it
        return True


def in_use_iou(cfg: Any) -> None:
    """mmseg's `IoUMetric` evaluators -> `IoUMetricInUse` (the same metrics; the table of the classes in use)."""
    for key in ('val_evaluator', 'test_evaluator'):
        evaluators = cfg.get(key)
        for evaluator in evaluators if isinstance(evaluators, list) else [evaluators]:
            if isinstance(evaluator, dict) and str(evaluator.get('type', '')).split('.')[-1] == 'IoUMetric':
                evaluator['type'] = 'IoUMetricInUse'


def readable_config(cfg: Any) -> None:
    fit_log_interval(cfg)
    if cfg.get('default_scope') == 'mmseg':
        in_use_iou(cfg)


def readable_logger(logger: logging.Logger) -> None:
    """Attach `ParamwiseOptionsAtDebug` to a Runner's logger (once)."""
    if not any(isinstance(f, ParamwiseOptionsAtDebug) for f in logger.filters):
        logger.addFilter(ParamwiseOptionsAtDebug())
