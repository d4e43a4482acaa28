"""Train a detector (mmdet), segmentor (mmseg) or classifier (mmpretrain) config with an mmrecvit backbone.

Same flags as mmdet's, mmseg's and mmpretrain's `tools/train.py`; the task follows the config's
`default_scope`. Examples:
    python tools/train.py configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py
    python tools/train.py configs/cls/srvit-ti_1xb32-200it_toy-cls.py
    python tools/train.py CONFIG --resume                 # from the latest checkpoint in work_dir
    python tools/train.py CONFIG --cfg-options train_cfg.max_iters=10
    bash tools/dist_train.sh CONFIG 2                     # 2 processes (gloo on CPU, nccl on GPU)
"""

from __future__ import annotations

import os.path as osp

import torch
from mmengine.config import Config
from mmengine.runner import Runner

import mmrecvit.mm  # noqa: F401  (compat fixes + registration)
from mmrecvit.inputs import bad_input, checkpoint_file
from mmrecvit.mm import cli
from mmrecvit.mm.dist import exit_distributed_process


def parse_args(argv=None):
    parser = cli.tool_parser(
        'Train a detector, segmentor or classifier',
        {'config': 'train config file path'},
        work_dir_help='the dir to save logs and models',
    )
    parser.add_argument(
        '--amp',
        action='store_true',
        default=False,
        help="enable automatic-mixed-precision training (fp16 by default: mmengine's AmpOptimWrapper, needs a GPU)",
    )
    parser.add_argument(
        '--amp-dtype',
        choices=['fp16', 'bf16'],
        default=None,
        help='fp16: the whole model under autocast with loss scaling (mmengine, GPU); bf16: the '
        'mmrecvit backbone under bf16 autocast (implies --amp; CPU or GPU; no loss scaling; the '
        "heads stay fp32 because mmcv's RoIAlign/nms have no bf16 kernels)",
    )
    parser.add_argument('--auto-scale-lr', action='store_true', help='scale lr by the actual total batch size')
    parser.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='resume from this checkpoint, or without a path from the latest one in work_dir',
    )
    cli.add_launch_arguments(parser, cfg_options_example='model.backbone.depth=8')
    return cli.parse_args(parser, argv)


def build_cfg(args) -> Config:
    cfg = cli.load_config(args)
    if args.amp_dtype == 'bf16':
        cfg.model.backbone.amp_dtype = 'bf16'
    elif args.amp or args.amp_dtype == 'fp16':
        if not torch.cuda.is_available():
            raise SystemExit(
                "--amp uses mmengine's AmpOptimWrapper (fp16 loss scaling), which needs a GPU; "
                'none is visible on this machine.'
            )
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.loss_scale = 'dynamic'
        cfg.optim_wrapper.dtype = 'float16'
    if args.auto_scale_lr:
        if 'auto_scale_lr' not in cfg or 'base_batch_size' not in cfg.auto_scale_lr:
            raise SystemExit('--auto-scale-lr needs `auto_scale_lr = dict(base_batch_size=...)` in the config')
        cfg.auto_scale_lr.enable = True
    if args.resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
    elif args.resume is not None:
        cfg.resume = True
        cfg.load_from = checkpoint_file(args.resume, '--resume', allow_none=False)
    return cfg


def main(argv=None) -> Runner:
    args = parse_args(argv)
    with bad_input(osp.basename(__file__)):
        runner = cli.build_runner(build_cfg(args), args.launcher, tool=osp.basename(__file__))
    runner.train()
    return runner


if __name__ == '__main__':
    main()
    exit_distributed_process()  # after a torchrun launch (see its docstring); else nothing
