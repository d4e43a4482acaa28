"""The training and evaluation loop of `tools/d2_train_net.py`, in the manner of detectron2's
`tools/lazyconfig_train_net.py`: a LazyConfig with `model`, `dataloader.{train,test,evaluator}`,
`optimizer`, `lr_multiplier` and `train` (detectron2's `common/train.py`) is instantiated and run by
detectron2's own trainer, hooks and checkpointer, and evaluated by the config's evaluator (our
recipes: detectron2's `COCOEvaluator`).

Differences from `lazyconfig_train_net.py`: the last evaluation is returned (and written to
`<output_dir>/eval.json`), and the writers are the console and `metrics.json` only (no tensorboard
events; detectron2's own tool writes them, hence tensorboard in requirements.txt).
"""

from __future__ import annotations

import json
import logging
import os
import os.path as osp
from typing import Any

from detectron2.checkpoint import DetectionCheckpointer
from detectron2.config import LazyConfig, instantiate
from detectron2.engine import AMPTrainer, SimpleTrainer, default_setup, hooks
from detectron2.engine.defaults import create_ddp_model
from detectron2.evaluation import inference_on_dataset, print_csv_format
from detectron2.utils import comm
from detectron2.utils.events import CommonMetricPrinter, JSONWriter

logger = logging.getLogger('detectron2')


def do_test(cfg: Any, model: Any) -> dict:
    """Evaluate `model` on `cfg.dataloader.test` with `cfg.dataloader.evaluator` ({} without one)."""
    if 'evaluator' not in cfg.dataloader:
        return {}
    results = inference_on_dataset(model, instantiate(cfg.dataloader.test), instantiate(cfg.dataloader.evaluator))
    if comm.is_main_process():
        print_csv_format(results)
    return results


def do_train(cfg: Any, resume: bool = False) -> dict:
    """Train as the config says; returns the last evaluation (EvalHook runs one at the end)."""
    os.makedirs(cfg.train.output_dir, exist_ok=True)
    model = instantiate(cfg.model)
    model.to(cfg.train.device)
    cfg.optimizer.params.model = model
    optimizer = instantiate(cfg.optimizer)
    train_loader = instantiate(cfg.dataloader.train)

    model = create_ddp_model(model, **cfg.train.ddp)
    trainer = (AMPTrainer if cfg.train.amp.enabled else SimpleTrainer)(model, train_loader, optimizer)
    checkpointer = DetectionCheckpointer(model, cfg.train.output_dir, trainer=trainer)
    last: dict = {}

    def evaluate() -> dict:
        last.clear()
        last.update(do_test(cfg, model))
        return last

    writers = [CommonMetricPrinter(cfg.train.max_iter), JSONWriter(osp.join(cfg.train.output_dir, 'metrics.json'))]
    trainer.register_hooks(
        [
            hooks.IterationTimer(),
            hooks.LRScheduler(scheduler=instantiate(cfg.lr_multiplier)),
            hooks.PeriodicCheckpointer(checkpointer, **cfg.train.checkpointer) if comm.is_main_process() else None,
            hooks.EvalHook(cfg.train.eval_period, evaluate),
            hooks.PeriodicWriter(writers, period=cfg.train.log_period) if comm.is_main_process() else None,
        ]
    )
    checkpointer.resume_or_load(cfg.train.init_checkpoint, resume=resume)
    # a checkpoint stores the iteration that just finished
    start_iter = trainer.iter + 1 if resume and checkpointer.has_checkpoint() else 0
    trainer.train(start_iter, cfg.train.max_iter)
    return last


def main(args: Any) -> dict:
    """`tools/d2_train_net.py`'s work in one process (detectron2's `launch` runs it per GPU)."""
    cfg = LazyConfig.apply_overrides(LazyConfig.load(args.config_file), args.opts)
    default_setup(cfg, args)
    if args.eval_only:
        model = instantiate(cfg.model)
        model.to(cfg.train.device)
        model = create_ddp_model(model)
        DetectionCheckpointer(model).load(cfg.train.init_checkpoint)
        results = do_test(cfg, model)
    else:
        results = do_train(cfg, resume=args.resume)
    if comm.is_main_process() and results:
        with open(osp.join(cfg.train.output_dir, 'eval.json'), 'w') as f:
            json.dump(results, f, indent=1)
    return results
