"""Evaluate a detector (mmdet), segmentor (mmseg) or classifier (mmpretrain) checkpoint; same flags as
their `tools/test.py`. The framework follows the config's `default_scope`.

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out FILE|DIR] [--show-dir DIR] [--tta]
    bash tools/dist_test.sh CONFIG CHECKPOINT 2

What `--out` writes follows each framework's own tool: det and cls dump the predictions to a .pkl file,
seg saves the predicted maps in a folder. `--show-dir DIR` draws every test image (whatever the interval of
the config's visualization hook) into DIR itself: det `DIR/<image file name>` (mmdet's `test_out_dir`, given
as an absolute path: mmdet puts a relative one under `<work-dir>/<timestamp>/`), seg `DIR/<image stem>.png`
(`mmrecvit.mm.visualization.SegShowDirVisualizer`), cls `DIR/<image file name>_0.png` (mmpretrain's `out_dir`).

`--tta`: test-time augmentation as mmdet's and mmseg's tools do it: the config's `tta_model` wraps
its model and its `tta_pipeline` replaces the test pipeline (det configs: flips, merged with the
masks by `mmrecvit.mm.tta.MaskDetTTAModel`; seg configs: mmseg's multi-scale + flip `SegTTAModel`).
"""

from __future__ import annotations

import os.path as osp

from mmengine.config import Config, ConfigDict

import mmrecvit.mm  # noqa: F401  (compat fixes + registration)
from mmrecvit.inputs import bad_input, checkpoint_file
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
    parser.add_argument('--show-dir', help='draw the prediction of every test image into this dir')
    parser.add_argument('--wait-time', type=float, default=2, help='the interval of show (s)')
    parser.add_argument(
        '--tta', action='store_true', help="test-time augmentation: the config's tta_model over its tta_pipeline"
    )
    cli.add_launch_arguments(parser, cfg_options_example='model.backbone.max_depth=8')
    return cli.parse_args(parser, argv)


def build_cfg(args) -> Config:
    cfg = cli.load_config(args)
    task = cfg.get('default_scope')
    if task not in SCOPES:
        raise SystemExit(f'config default_scope must be one of {", ".join(map(repr, SCOPES))}, got {task!r}')
    cfg.load_from = checkpoint_file(args.checkpoint, allow_none=False)
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
    """Switch the config's visualization hook on for every test image, in the framework's own terms, drawing
    into `--show-dir` itself (module docstring)."""
    hook = cfg.default_hooks.get('visualization')
    if hook is None:
        raise SystemExit('--show/--show-dir need a visualization hook: the config has no default_hooks.visualization')
    hook['interval'] = 1  # every image: the configs' intervals (mmseg 50, mmpretrain 5000) skip most of a test set
    if task == 'mmpretrain':  # mmpretrain's VisualizationHook: `enable`, every `interval`-th sample, `out_dir`
        hook.update(enable=True, show=args.show, wait_time=args.wait_time)
        if args.show_dir:
            hook['out_dir'] = args.show_dir
        return
    hook['draw'] = True
    if args.show:
        hook['show'] = True
        hook['wait_time'] = args.wait_time
    if args.show_dir:
        if task == 'mmdet':
            hook['test_out_dir'] = osp.abspath(args.show_dir)
        else:
            kind = str(cfg.visualizer.get('type', '')).split('.')[-1]
            if kind != 'SegLocalVisualizer':
                raise SystemExit(f"--show-dir draws with mmseg's SegLocalVisualizer; the config's visualizer is {kind}")
            cfg.visualizer.update(type='SegShowDirVisualizer', out_dir=args.show_dir)


def main(argv=None) -> dict:
    args = parse_args(argv)
    with bad_input(osp.basename(__file__)):
        runner = cli.build_runner(build_cfg(args), args.launcher, tool=osp.basename(__file__), strict_load=True)
    return runner.test()


if __name__ == '__main__':
    main()
    exit_distributed_process()  # after a torchrun launch (see its docstring); else nothing
