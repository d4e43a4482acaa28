"""A short training's log a reader can follow (issue 41.4): log intervals that suit the run length, one line for
mmengine's per-parameter options and for our layer-decay groups (details at DEBUG), the per-class IoU table of the
classes in use, the pinned stack's own deprecation notices silenced one by one (`mmrecvit.mm.compat`, fix 6)."""

import io
import logging
import os.path as osp
import sys
import warnings

import numpy as np
import pytest
import torch
from backbone_cases import BACKBONE_CASES
from helpers import REPO, toy_cfg_options
from mmengine.config import Config
from mmengine.logging import MMLogger, print_log
from mmengine.optim import build_optim_wrapper

from mmrecvit.mm import compat, logs
from mmrecvit.mm.metrics import IoUMetricInUse
from mmrecvit.models import BACKBONES

SEG = osp.join(REPO, 'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py')
sys.path.insert(0, osp.join(REPO, 'tools'))
import train as train_tool  # noqa: E402  (tools/train.py)


@pytest.mark.parametrize(
    'max_iters, interval, expected',
    [(10, 10, 1), (60, 10, 6), (150, 10, 10), (160_000, 50, 50), (5, 10, 1)],
)
def test_an_iteration_based_run_logs_at_least_ten_times(max_iters, interval, expected):
    cfg = Config(
        dict(
            train_cfg=dict(type='IterBasedTrainLoop', max_iters=max_iters),
            default_hooks=dict(logger=dict(type='LoggerHook', interval=interval)),
        )
    )
    logs.fit_log_interval(cfg)
    assert cfg.default_hooks.logger.interval == expected


def test_an_epoch_based_run_keeps_its_interval():
    cfg = Config(
        dict(train_cfg=dict(type='EpochBasedTrainLoop', max_epochs=3), default_hooks=dict(logger=dict(interval=100)))
    )
    logs.fit_log_interval(cfg)
    assert cfg.default_hooks.logger.interval == 100


def logger_output(level: str, lines: list[tuple[int, str]]) -> str:
    """What an MMLogger at `level` with our filter prints for `lines` (level, message)."""
    stream = io.StringIO()
    logger = MMLogger.get_instance(f'test_logs_{level}_{len(lines)}', log_level=level)
    handler = logging.StreamHandler(stream)
    handler.setLevel(logger.handlers[0].level)
    logger.addHandler(handler)
    logs.readable_logger(logger)
    for lvl, msg in lines:
        print_log(msg, logger=logger, level=lvl)
    logger.removeHandler(handler)
    return stream.getvalue()


def test_mmengines_per_parameter_options_are_one_line_with_the_detail_at_debug():
    lines = [
        (logging.INFO, f'paramwise_options -- backbone.blocks.{i}.norm1.weight:weight_decay=0.0') for i in range(5)
    ]
    lines.append((logging.INFO, 'another line'))
    out = logger_output('INFO', lines).splitlines()
    assert out == [
        "paramwise_options: the options mmengine's custom_keys set per parameter (weight decay, lr multipliers) are "
        "listed at log_level='DEBUG'",
        'another line',
    ]
    detail = logger_output('DEBUG', lines)
    assert all(f'backbone.blocks.{i}.norm1.weight' in detail for i in range(1, 5))


def test_the_layer_decay_groups_are_one_info_line():
    from mmengine.registry import init_default_scope

    init_default_scope('mmseg')  # where mmrecvit registers the constructor
    model = torch.nn.Module()
    model.backbone = BACKBONES['PlainViT'](**BACKBONE_CASES['PlainViT'])
    cfg = dict(
        type='OptimWrapper',
        constructor='LayerDecayOptimWrapperConstructor',
        optimizer=dict(type='AdamW', lr=1e-3),
        paramwise_cfg=dict(layer_decay_rate=0.5),
    )
    stream = io.StringIO()
    logger = MMLogger.get_instance('test_logs_decay', log_level='INFO')
    logger.addHandler(handler := logging.StreamHandler(stream))
    handler.setLevel(logging.INFO)
    build_optim_wrapper(model, cfg)
    logger.removeHandler(handler)
    (line,) = [x for x in stream.getvalue().splitlines() if 'layer-wise lr decay' in x]
    assert line == (
        'layer-wise lr decay 0.5 (per_layer: rate 0.5): backbone lr x0.03125 (depth 0) to x0.5 (depth 4) over 5 '
        "depths, other parameters x1 (each depth at log_level='DEBUG')"
    )


def test_the_iou_table_lists_the_classes_in_use_and_the_metrics_are_mmsegs(capsys):
    from mmseg.evaluation import IoUMetric

    classes = tuple(f'class{i}' for i in range(150))
    gt = np.zeros((2, 8, 8), np.int64)
    gt[0, :4], gt[0, 4:], gt[1] = 3, 7, 11  # classes 3, 7, 11 in the ground truth
    pred = gt.copy()
    pred[1, :2] = 20  # 20 predicted, absent from the ground truth: IoU 0, in mIoU as in mmseg
    ours, theirs = IoUMetricInUse(), IoUMetric()
    for metric in (ours, theirs):
        metric.dataset_meta = dict(classes=classes)
        results = [
            metric.intersect_and_union(torch.from_numpy(p), torch.from_numpy(g), 150, 255) for p, g in zip(pred, gt)
        ]
        metric.results = results
    MMLogger.get_instance('test_logs_iou')
    expected = theirs.compute_metrics(theirs.results)
    capsys.readouterr()
    assert ours.compute_metrics(ours.results) == expected
    out = capsys.readouterr().out
    rows = [line.split('|')[1].strip() for line in out.splitlines() if line.startswith('|')][1:]
    assert rows == ['class3', 'class7', 'class11', 'class20']
    assert '146 classes of the dataset are in neither (IoU nan, not in mIoU): not listed' in out


def test_the_runner_of_our_tools_gets_the_readable_log(toy_root, tmp_path):
    from mmrecvit.mm import cli

    args = train_tool.parse_args([SEG, *toy_cfg_options('seg', toy_root, tmp_path, iters=10)])
    cfg = cli.load_config(args)
    cfg.default_hooks.logger.interval = 10
    runner = cli.build_runner(cfg, 'none', tool='train.py')
    (hook,) = [h for h in runner.hooks if type(h).__name__ == 'LoggerHook']
    assert hook.interval == 1  # 10 iterations: every one logged
    assert type(runner.val_evaluator.metrics[0]).__name__ == 'IoUMetricInUse'
    assert any(isinstance(f, logs.ParamwiseOptionsAtDebug) for f in runner.logger.filters)


@pytest.mark.parametrize(
    'module, category, message', compat.QUIET_WARNINGS, ids=[q[2][:24] for q in compat.QUIET_WARNINGS]
)
def test_the_stacks_own_notices_are_silenced_and_nothing_else(module, category, message):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')  # every warning shown (ImportWarning included), then ours ahead of it
        compat.quiet_warnings()
        warnings.warn_explicit(f'{message} (and the rest)', category, 'x.py', 1, module=module or 'mmengine.x')
        warnings.warn_explicit(f'not {message}', category, 'x.py', 2, module=module or 'mmengine.x')
        if module:
            warnings.warn_explicit(f'{message} (and the rest)', category, 'x.py', 3, module='users_own_code')
    assert [str(w.message) for w in caught] == [f'not {message}'] + ([f'{message} (and the rest)'] if module else [])
