"""Evaluate a detector (mmdet), segmentor (mmseg) or classifier (mmpretrain) checkpoint; same flags as
their `tools/test.py`. The framework follows the config's `default_scope`.

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out FILE|DIR] [--show-dir DIR] [--tta]
    bash tools/dist_test.sh CONFIG CHECKPOINT 2

What `--out` and `--show-dir` write follows each framework's own tool: det and cls dump the predictions
to a .pkl file, seg saves the predicted maps in a folder; det draws into `<work-dir>/<timestamp>/DIR`,
seg and cls into DIR itself.

`--tta`: test-time augmentation as mmdet's and mmseg's tools do it: the config's `tta_model` wraps
its model and its `tta_pipeline` replaces the test pipeline (det configs: flips, merged with the
masks by `mmrecvit.mm.tta.MaskDetTTAModel`; seg configs: mmseg's multi-scale + flip `SegTTAModel`).
"""

from __future__ import annotations

import os.path as osp

from mmengine.config import Config, ConfigDict

import mmrecvit  # noqa: F401  (compat fixes + registration)
from mmrecvit.mm import cli
from mmrecvit.mm.dist import exit_distributed_process
from mmrecvit.mm.registry import SCOPES


def parse_args(argv=None):
    parser = cli.tool_parser(
        'Test (and evaluate) a detector, segmentor or classifier',
        {'config': 'test config file path', 'checkpoint': 'checkpoint file'},
        work_dir_help='the dir to save the evaluation metrics',
    )
    parser.add_argument(
        '--out', help='det, cls: dump predictions to this .pkl file; seg: save predicted maps in this dir'
    )
    parser.add_argument('--show', action='store_true', help='show prediction results in a window')
    parser.add_argument('--show-dir', help='save drawn predictions (PNG) in this dir')
    parser.add_argument('--wait-time', type=float, default=2, help='the interval of show (s)')
    parser.add_argument(
        '--tta', action='store_true', help="test-time augmentation: the config's tta_model over its tta_pipeline"
    )
    cli.add_launch_arguments(parser, cfg_options_example='model.backbone.max_depth=8')
    return cli.parse_args(parser, argv)


def build_cfg(args) -> Config:
    cfg = cli.load_config(args)
    cfg.load_from = args.checkpoint
    task = cfg.get('default_scope')
    if task not in SCOPES:
        raise SystemExit(f'config default_scope must be one of {", ".join(map(repr, SCOPES))}, got {task!r}')
    if args.tta:
        missing = [k for k in ('tta_model', 'tta_pipeline') if not cfg.get(k)]
        if missing:
            raise SystemExit(f'--tta needs {" and ".join(missing)} in the config')
        cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
        cfg.model = ConfigDict(**cfg.tta_model, module=cfg.model)
    if args.show or args.show_dir:
        show_predictions(cfg, task, args)
    if args.out is not None:
        if task == 'mmseg':
            cfg.test_evaluator['output_dir'] = args.out
            cfg.test_evaluator['keep_results'] = True
        else:
            if not args.out.endswith(('.pkl', '.pickle')):
                raise SystemExit(f'--out must be a .pkl/.pickle file for {task}, got {args.out!r}')
            dump = dict(type='DumpDetResults' if task == 'mmdet' else 'DumpResults', out_file_path=args.out)
            cfg.test_evaluator = [*cfg.test_evaluator] if isinstance(cfg.test_evaluator, list) else [cfg.test_evaluator]
            cfg.test_evaluator.append(dump)
    return cfg


def show_predictions(cfg: Config, task: str, args) -> None:
    """Switch the config's visualization hook on, in the framework's own terms."""
    hook = cfg.default_hooks.get('visualization')
    if hook is None:
        raise SystemExit('--show/--show-dir need a visualization hook: the config has no default_hooks.visualization')
    if task == 'mmpretrain':  # mmpretrain's VisualizationHook: `enable`, every `interval`-th sample, `out_dir`
        hook.update(enable=True, interval=1, show=args.show, wait_time=args.wait_time)
        if args.show_dir:
            hook['out_dir'] = args.show_dir
        return
    hook['draw'] = True
    if args.show:
        hook['show'] = True
        hook['wait_time'] = args.wait_time
    if args.show_dir:
        if task == 'mmdet':
            hook['test_out_dir'] = args.show_dir
        else:
            cfg.visualizer['save_dir'] = args.show_dir


def main(argv=None) -> dict:
    args = parse_args(argv)
    runner = cli.build_runner(build_cfg(args), args.launcher, tool=osp.basename(__file__), strict_load=True)
    return runner.test()


if __name__ == '__main__':
    main()
    exit_distributed_process()  # after a torchrun launch (see its docstring); else nothing
