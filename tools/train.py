"""Train a detector (mmdet) or segmentor (mmseg) config with an mmrecvit backbone.

Same flags as mmdet's and mmseg's `tools/train.py`; the task follows the config's
`default_scope`. Examples:
    python tools/train.py configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py
    python tools/train.py CONFIG --resume                 # from the latest checkpoint in work_dir
    python tools/train.py CONFIG --cfg-options train_cfg.max_iters=10
    bash tools/dist_train.sh CONFIG 2                     # 2 processes (gloo on CPU, nccl on GPU)
"""
from __future__ import annotations

import argparse
import os
import os.path as osp

import torch
from mmengine.config import Config, DictAction
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import mmrecvit  # noqa: F401  (compat fixes + registration)
from mmrecvit.mm.checkpoint import check_checkpoint_to_load
from mmrecvit.mm.dist import exit_distributed_process, setup_cpu_distributed


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Train a detector or segmentor')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
    parser.add_argument('--amp', action='store_true', default=False,
                        help='enable automatic-mixed-precision training (fp16, needs a GPU)')
    parser.add_argument('--auto-scale-lr', action='store_true', help='scale lr by the actual total batch size')
    parser.add_argument('--resume', nargs='?', type=str, const='auto',
                        help='resume from this checkpoint, or without a path from the latest one in work_dir')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, e.g. model.backbone.depth=8')
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
    if args.amp:
        if not torch.cuda.is_available():
            raise SystemExit('--amp uses mmengine\'s AmpOptimWrapper (fp16 loss scaling), which needs a GPU; '
                             'none is visible on this machine.')
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.loss_scale = 'dynamic'
    if args.auto_scale_lr:
        if 'auto_scale_lr' not in cfg or 'base_batch_size' not in cfg.auto_scale_lr:
            raise SystemExit('--auto-scale-lr needs `auto_scale_lr = dict(base_batch_size=...)` in the config')
        cfg.auto_scale_lr.enable = True
    if args.resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
    elif args.resume is not None:
        cfg.resume = True
        cfg.load_from = args.resume
    setup_cpu_distributed(cfg, args.launcher)
    return cfg


def main(argv=None) -> Runner:
    args = parse_args(argv)
    cfg = build_cfg(args)
    try:  # a bad file: one clear line instead of torch's error deep inside the Runner (mmrecvit/mm/checkpoint.py)
        check_checkpoint_to_load(cfg)
    except (OSError, RuntimeError) as e:
        raise SystemExit(f'{osp.basename(__file__)}: {e}') from e
    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    runner.train()
    return runner


if __name__ == '__main__':
    main()
    exit_distributed_process()  # after a torchrun launch (see its docstring); else nothing
