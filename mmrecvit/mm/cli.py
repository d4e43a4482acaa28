"""The command line that `tools/train.py` and `tools/test.py` share, with the flags of mmdet's and
mmseg's tools of the same names.

A tool makes its parser with `tool_parser` (its files and `--work-dir`), adds its own flags, then
`add_launch_arguments` (`--cfg-options`, `--launcher`, `--local_rank`, last as in mmdet's tools),
reads the arguments with `parse_args` and the config with `load_config`, makes its own changes to
the config, and builds the Runner with `build_runner`, both inside `mmrecvit.inputs.bad_input`: a wrong
file, argument name or value, or `type` ends the tool with one line naming it (status 2).
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
from collections import Counter
from collections.abc import Sequence

from mmengine.config import Config, DictAction
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from ..inputs import bad_input, config_file
from .checkpoint import check_checkpoint_matches_model, check_checkpoint_to_load, checkpoint_to_load
from .dist import setup_cpu_distributed
from .logs import readable_config, readable_logger

LAUNCHERS = ('none', 'pytorch', 'slurm', 'mpi')
_RUNS = Counter()  # the Runners `build_runner` built in this process, per experiment name


def tool_parser(description: str, files: dict[str, str], work_dir_help: str) -> argparse.ArgumentParser:
    """A parser with the tool's positional files (name -> help) and `--work-dir`."""
    parser = argparse.ArgumentParser(description=description)
    for name, help_text in files.items():
        parser.add_argument(name, help=help_text)
    parser.add_argument('--work-dir', help=work_dir_help)
    return parser


def add_launch_arguments(parser: argparse.ArgumentParser, cfg_options_example: str) -> None:
    """`--cfg-options` (its help shows `cfg_options_example`), `--launcher` and `--local_rank`."""
    parser.add_argument(
        '--cfg-options', nargs='+', action=DictAction, help=f'override config settings, e.g. {cfg_options_example}'
    )
    parser.add_argument('--launcher', choices=list(LAUNCHERS), default='none', help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed arguments; `LOCAL_RANK` is set from `--local_rank` when the launcher did not set it."""
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def load_config(args: argparse.Namespace) -> Config:
    """`args.config` (a file, or `mmrecvit::<folder>/<file>.py`: one of the installed configs) with the launcher
    and `--cfg-options` applied, and a work dir: `--work-dir`, else the config's, else `./work_dirs/<config name>`."""
    cfg = Config.fromfile(config_file(args.config))
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
    return cfg


def build_runner(cfg: Config, launcher: str, tool: str, strict_load: bool = False) -> Runner:
    """The config's Runner (its own `runner_type` when it names one), after the CPU distributed set-up
    for `--launcher` (`mmrecvit.mm.dist`) and a check of the checkpoint it will load, before (the file)
    and after (its keys against the model's: all of them for `--resume` or `strict_load`) the Runner
    is built; `tool` names the tool in the one-line error (`bad_input`, status 2)."""
    setup_cpu_distributed(cfg, launcher)
    if cfg.get('visualizer') is not None:
        # A visualizer of its own per Runner (named after the run): for a name already taken, mmengine returns
        # the existing instance without making it the current one, so the visualization hook of a second run in
        # one process (tests, `demo.py --task transfer`) would draw with another task's visualizer.
        cfg.visualizer.pop('name', None)
    own_experiment_name(cfg)
    readable_config(cfg)  # log intervals that suit the run, the IoU table of the classes in use (logs.py)
    path, resume = checkpoint_to_load(cfg)
    with bad_input(tool):  # a bad checkpoint, argument name or value, or `type`: one line, not torch's traceback
        check_checkpoint_to_load(cfg)  # before the Runner: the file itself (mmrecvit/mm/checkpoint.py)
        runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
        # mmengine loads non-strictly: another model's file would pass with a warning
        check_checkpoint_matches_model(runner.model, path, strict=resume or strict_load)
    readable_logger(runner.logger)
    return runner


def own_experiment_name(cfg: Config) -> None:
    """mmengine names a run's logger, message hub and visualizer `<experiment name>_<timestamp in seconds>`, and
    for a name already taken returns the existing instance: a second Runner of one config built within the same
    second of one process (tests, `demo.py`, `compute_curve.py`) logged and drew into the first one's files. The
    second and later Runners of an experiment name in a process get `_run<n>` on it; the first keeps mmengine's."""
    base = cfg.get('experiment_name') or (osp.splitext(osp.basename(cfg.filename))[0] if cfg.filename else 'run')
    _RUNS[base] += 1
    if _RUNS[base] > 1:
        cfg.experiment_name = f'{base}_run{_RUNS[base]}'


def release_workers(runner: Runner) -> None:
    """Stop the worker processes of the runner's data loaders now, for a process that goes on to other Runners
    (tools/demo.py, compute_curve.py). With `persistent_workers` (the recipes' default) they live until the loader
    is garbage-collected, and torch's shutdown run from inside `gc.collect()` waits out its 5 s join timeout per
    worker (pytorch#81794). torch has no public close for a loader (pytorch#64766): its iterator's own shutdown, as
    Lightning's teardown calls it."""
    for loop in (runner._train_loop, runner._val_loop, runner._test_loop):  # built loops; a dict if never built
        loader = getattr(loop, 'dataloader', None)
        iterator = getattr(loader, '_iterator', None)
        if iterator is not None and hasattr(iterator, '_shutdown_workers'):
            iterator._shutdown_workers()
            loader._iterator = None
