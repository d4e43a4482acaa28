"""Evaluate a detector (mmdet) or segmentor (mmseg) checkpoint; same flags as their `tools/test.py`.

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out FILE|DIR] [--show-dir DIR]
    bash tools/dist_test.sh CONFIG CHECKPOINT 2
"""
from __future__ import annotations

import argparse
import os
import os.path as osp

from mmengine.config import Config, DictAction
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import mmrecvit  # noqa: F401  (compat fixes + registration)
from mmrecvit.mm.checkpoint import check_checkpoint_to_load
from mmrecvit.mm.dist import exit_distributed_process, setup_cpu_distributed


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Test (and evaluate) a detector or segmentor')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='the dir to save the evaluation metrics')
    parser.add_argument('--out', help='det: dump predictions to this .pkl file; seg: save predicted maps in this dir')
    parser.add_argument('--show', action='store_true', help='show prediction results in a window')
    parser.add_argument('--show-dir', help='save drawn predictions (PNG) in this dir')
    parser.add_argument('--wait-time', type=float, default=2, help='the interval of show (s)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, e.g. model.backbone.max_depth=8')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def build_cfg(args) -> Config:
    cfg = Config.fromfile(args.config)
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
    cfg.load_from = args.checkpoint
    task = cfg.get('default_scope')
    if task not in ('mmdet', 'mmseg'):
        raise SystemExit(f"config default_scope must be 'mmdet' or 'mmseg', got {task!r}")
    if args.show or args.show_dir:
        hook = cfg.default_hooks.visualization
        hook['draw'] = True
        if args.show:
            hook['show'] = True
            hook['wait_time'] = args.wait_time
        if args.show_dir:
            if task == 'mmdet':
                hook['test_out_dir'] = args.show_dir
            else:
                cfg.visualizer['save_dir'] = args.show_dir
    if args.out is not None:
        if task == 'mmdet':
            if not args.out.endswith(('.pkl', '.pickle')):
                raise SystemExit(f'--out must be a .pkl/.pickle file for detection, got {args.out!r}')
            cfg.test_evaluator = [*cfg.test_evaluator] if isinstance(cfg.test_evaluator, list) else [cfg.test_evaluator]
            cfg.test_evaluator.append(dict(type='DumpDetResults', out_file_path=args.out))
        else:
            cfg.test_evaluator['output_dir'] = args.out
            cfg.test_evaluator['keep_results'] = True
    setup_cpu_distributed(cfg, args.launcher)
    return cfg


def main(argv=None) -> dict:
    args = parse_args(argv)
    cfg = build_cfg(args)
    try:  # a bad file: one clear line instead of torch's error deep inside the Runner (mmrecvit/mm/checkpoint.py)
        check_checkpoint_to_load(cfg)
    except (OSError, RuntimeError) as e:
        raise SystemExit(f'{osp.basename(__file__)}: {e}') from e
    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    return runner.test()


if __name__ == '__main__':
    main()
    exit_distributed_process()  # after a torchrun launch (see its docstring); else nothing
