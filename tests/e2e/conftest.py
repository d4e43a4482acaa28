"""The trained toy runs the e2e tests share: each is made once per test run (`helpers.once`), whichever
xdist worker asks first, and read by every test that needs a trained checkpoint or a run's files.

* `plainvit_toys`: the toy demo (tools/demo.py --task both) trains, evaluates and draws the PlainViT toy Mask R-CNN
  and UperNet: the one det and one seg training of PlainViT.
* `transfer_demo`: tools/demo.py --task transfer with MoR-ViT (the toy classifier, then the toy Mask
  R-CNN from it): MoR-ViT's det training.
* `cls_runs(method)`: the toy classifier of a method through tools/train.py.
* `revit_seg_reference`: the deterministic 4-iteration toy UperNet with reViT that the resume and the
  kill tests both compare against.
* `two_rank_run`: the deterministic MoR-ViT toy UperNet trained by tools/dist_train.sh with 2 ranks,
  compared with one process and with a run whose rank 1 is killed.
* `d2_toys(method)`: each method's detectron2 toy Mask R-CNN (mmrecvit.d2.train.do_train).
"""

import contextlib
import io
import os.path as osp
import sys
from pathlib import Path

import pytest
from helpers import (
    D2_TOY,
    ITERS,
    REFERENCE_ITERS,
    REPO,
    REVIT_SEG,
    SUBPROCESS_ENV,
    d2_toy_overrides,
    deterministic_seg_config,
    free_port,
    once,
    one_deterministic_thread,
    revit_seg_options,
    run,
    toy_cfg_options,
    two_rank_options,
)

sys.path.insert(0, osp.join(REPO, 'tools'))
sys.path.insert(0, osp.dirname(__file__))  # ddp_workers.py: the ranks' code, imported by name
import demo as demo_tool  # noqa: E402  (tools/demo.py)
import train as train_tool  # noqa: E402  (tools/train.py)


@pytest.fixture(scope='session')
def plainvit_toys(tmp_path_factory, toy_root):
    """`python tools/demo.py --task both` with the tests' toy sets, shortened: its printed output and run folders."""

    def make(out):
        command = [
            sys.executable,
            'tools/demo.py',
            '--task',
            'both',
            '--iters',
            str(ITERS),
            '--data-root',
            str(toy_root),
        ]
        res = run([*command, '--work-dir', str(out / 'demo')])
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        (out / 'demo.log').write_text(res.stdout + res.stderr)
        return dict(
            demo_log=str(out / 'demo.log'),
            det=str(out / 'demo' / 'det_plainvit'),
            seg=str(out / 'demo' / 'seg_plainvit'),
        )

    return {k: Path(v) for k, v in once(tmp_path_factory, 'plainvit_toys', make).items()}


@pytest.fixture(scope='session')
def transfer_demo(tmp_path_factory, toy_root):
    """tools/demo.py --task transfer --model morvit for 2 iterations: its results, folder and printed report."""

    def make(work):
        printed = io.StringIO()
        with one_deterministic_thread(), contextlib.redirect_stdout(printed):
            results = demo_tool.main(
                [
                    '--task',
                    'transfer',
                    '--model',
                    'morvit',
                    '--iters',
                    str(ITERS),
                    '--data-root',
                    str(toy_root),
                    '--work-dir',
                    str(work),
                ]
            )
        return dict(results=results, work=str(work / 'transfer_morvit'), output=printed.getvalue())

    return once(tmp_path_factory, 'transfer_demo', make)


@pytest.fixture(scope='session')
def cls_runs(tmp_path_factory, toy_root):
    """method -> the work folder of its toy classifier after 2 iterations (trained on first use)."""

    def get(method):
        def make(work):
            with one_deterministic_thread():
                train_tool.main([demo_tool.toy_config('cls', method), *toy_cfg_options('cls', toy_root, work)])
            return str(work)

        return Path(once(tmp_path_factory, f'cls_{method}', make))

    return get


@pytest.fixture(scope='session')
def revit_seg_reference(tmp_path_factory, toy_root):
    """The uninterrupted deterministic reViT toy UperNet (`revit_seg_options`): 4 iterations, validating after 2 and
    4 (validation must not shift the training streams), a checkpoint after each, all kept (a killed run is compared
    one iteration after its last complete checkpoint); its work folder."""

    def make(work):
        with one_deterministic_thread():
            train_tool.main(
                [
                    REVIT_SEG,
                    *revit_seg_options(toy_root, work, REFERENCE_ITERS),
                    'train_cfg.val_interval=2',
                    'default_hooks.checkpoint.interval=1',
                    'default_hooks.checkpoint.max_keep_ckpts=-1',
                ]
            )
        return str(work)

    return Path(once(tmp_path_factory, 'revit_seg_reference', make))


@pytest.fixture(scope='session')
def two_rank_run(tmp_path_factory, toy_root):
    """`bash tools/dist_train.sh CONFIG 2` (gloo on CPU), 4 iterations of batch 1 per rank, a checkpoint after
    each: the config, the work folder and the launcher's output."""

    def make(folder):
        config = deterministic_seg_config(folder)
        env = {**SUBPROCESS_ENV, 'PYTHON': sys.executable, 'PORT': str(free_port())}
        res = run(['bash', 'tools/dist_train.sh', config, '2', *two_rank_options(toy_root, folder / 'work')], env=env)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        return dict(config=config, work=str(folder / 'work'), output=res.stdout + res.stderr)

    return once(tmp_path_factory, 'two_rank_run', make)


@pytest.fixture(scope='session')
def d2_toys(tmp_path_factory, toy_root):
    """method -> (COCOEvaluator results, output folder) of its detectron2 toy Mask R-CNN after 2 iterations,
    trained in-process by what tools/d2_train_net.py runs (`mmrecvit.d2.train.main`: seeded, as the toys say)."""
    from detectron2.engine import default_argument_parser

    from mmrecvit.d2.train import main

    def get(method, config=None):
        def make(out):
            args = default_argument_parser().parse_args(
                ['--config-file', config or D2_TOY.format(method), *d2_toy_overrides(toy_root, out)]
            )
            with one_deterministic_thread():
                results = main(args)
            return dict(results=results, out=str(out))

        name = f'd2_{method}' if config is None else f'd2_{Path(config).stem}'
        return once(tmp_path_factory, name, make)

    return get
