"""detectron2's own tools run our LazyConfigs (issue 29): `tools/lazyconfig_train_net.py` (train, then
`--eval-only` on its checkpoint) and `tools/analyze_model.py --tasks flop parameter`, as files of the pinned
detectron2 source that scripts/setup.sh builds detectron2 from (`setup.sh --d2-source`), unmodified.

Its training writes through detectron2's `default_writers`, whose tensorboard writer needs the `tensorboard`
package (requirements.txt); without it the run dies after the first iteration."""

import hashlib
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from helpers import D2_TOY, REPO, d2_toy_overrides, run

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]  # ~80 s: every toy LazyConfig through detectron2's tools
TOYS = sorted(Path(REPO, 'configs/d2/toy').glob('*.py'))
# Runs detectron2's tool files as `__main__` one after another in one interpreter (the imports once), as
# `python FILE ARGS` would: argv lists from argv[1] (JSON); each run is framed by markers in stdout.
DRIVER = """import json, runpy, sys
for argv in json.loads(sys.argv[1]):
    print('@@ start', argv[0], flush=True)
    sys.argv = argv
    runpy.run_path(argv[0], run_name='__main__')
    print('@@ end', flush=True)
"""


def d2_source() -> str:
    return subprocess.run(
        ['bash', 'scripts/setup.sh', '--d2-source'], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope='module')
def d2_tools(tmp_path_factory) -> Path:
    """detectron2's `tools/` from the source scripts/setup.sh builds it from (tarball checked against the
    SHA256SUMS beside it, as setup.sh does, or a directory)."""
    src = Path(d2_source())
    if str(src).startswith('git+'):
        pytest.skip(
            f'no detectron2 source on this machine (setup.sh would build {src}): set MMRECVIT_D2_SOURCE '
            'to a tarball or directory of detectron2 source to run its tools'
        )
    if src.is_dir():
        return src / 'tools'
    sums = src.parent / 'SHA256SUMS'
    if sums.is_file():
        listed = {line.split()[1]: line.split()[0] for line in sums.read_text().splitlines() if line.strip()}
        assert listed.get(src.name) == hashlib.sha256(src.read_bytes()).hexdigest(), f'{src} does not match {sums}'
    out = tmp_path_factory.mktemp('d2_source')
    with tarfile.open(src) as tar:
        tar.extractall(out, members=[m for m in tar.getmembers() if '/tools/' in m.name], filter='data')
    (tools,) = out.glob('*/tools')
    return tools


def issue_command(d2_tools: Path, root, out: Path) -> list[list[str]]:
    """The issue's command: lazyconfig_train_net.py on the SR-ViT toy as it is (2 iterations), then --eval-only on
    its checkpoint."""
    config = ['--config-file', D2_TOY.format('srvit')]
    train = [
        str(d2_tools / 'lazyconfig_train_net.py'),
        *config,
        'train.max_iter=2',
        f'dataloader.train.dataset.names.root={root}/toy_coco',
        f'train.output_dir={out / "train"}',
        f'dataloader.test.dataset.names.root={root}/toy_coco',
        'dataloader.train.num_workers=0',
        'dataloader.test.num_workers=0',
    ]
    evaluate = [
        str(d2_tools / 'lazyconfig_train_net.py'),
        *config,
        '--eval-only',
        f'train.init_checkpoint={out / "train"}/model_final.pth',
        *d2_toy_overrides(root, out / 'eval'),
    ]
    return [train, evaluate]


def every_toy(d2_tools: Path, root, out: Path) -> list[list[str]]:
    """Every configs/d2/toy config: 2 iterations by lazyconfig_train_net.py, --eval-only on the checkpoint, and
    analyze_model.py's FLOP and parameter tables of the trained model (one input)."""
    runs = []
    for config in TOYS:
        folder = out / config.stem
        common = ['--config-file', str(config)]
        runs += [
            [str(d2_tools / 'lazyconfig_train_net.py'), *common, *d2_toy_overrides(root, folder)],
            [
                str(d2_tools / 'lazyconfig_train_net.py'),
                *common,
                '--eval-only',
                f'train.init_checkpoint={folder}/model_final.pth',
                *d2_toy_overrides(root, folder / 'eval'),
            ],
            [
                str(d2_tools / 'analyze_model.py'),
                *common,
                '--tasks',
                'flop',
                'parameter',
                '-n',
                '1',
                f'train.init_checkpoint={folder}/model_final.pth',
                *d2_toy_overrides(root, folder / 'analyze'),
            ],
        ]
    return runs


@pytest.fixture(scope='module')
def d2_tool_runs(d2_tools, toy_root, tmp_path_factory) -> tuple[Path, list[str]]:
    """The issue's command, then `every_toy`, one after another in one fresh interpreter (`DRIVER`: the first run
    starts as `python FILE` would, the later ones share its imports): the output folder and each run's output."""
    out = tmp_path_factory.mktemp('d2_tools')
    runs = [*issue_command(d2_tools, toy_root, out / 'issue'), *every_toy(d2_tools, toy_root, out)]
    res = run([sys.executable, '-c', DRIVER, json.dumps(runs)])
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    outputs = [part.split('@@ end')[0] for part in res.stdout.split('@@ start')[1:]]
    assert len(outputs) == len(runs) and res.stdout.count('@@ end') == len(runs)
    return out, outputs


def test_lazyconfig_train_net_trains_the_srvit_toy_writes_tensorboard_and_evaluates_its_checkpoint(d2_tool_runs):
    """The issue's command (the first runs of `d2_tool_runs`)."""
    folder, outputs = d2_tool_runs
    out = folder / 'issue' / 'train'
    assert [
        json.loads(line)['iteration']
        for line in (out / 'metrics.json').read_text().splitlines()
        if 'total_loss' in line
    ] == [1]  # log_period 20: the last iteration
    assert list(out.glob('events.out.tfevents.*')), 'no tensorboard events: default_writers did not write'
    assert "('bbox', {'AP'" in outputs[1] and "('segm', {'AP'" in outputs[1], outputs[1][-3000:]


def test_every_toy_trains_evaluates_and_is_analyzed_by_detectron2s_tools(d2_tool_runs):
    """Every configs/d2/toy config (`every_toy`, after the issue's command in `d2_tool_runs`)."""
    folder, outputs = d2_tool_runs
    outputs = outputs[2:]
    for config, train, test, analyze in zip(TOYS, outputs[0::3], outputs[1::3], outputs[2::3], strict=True):
        out = folder / config.stem
        assert (out / 'model_final.pth').is_file() and list(out.glob('events.out.tfevents.*')), config.name
        assert 'copypaste: Task: segm' in train, (config.name, train[-2000:])  # EvalHook's evaluation at the end
        assert "('bbox', {'AP'" in test and "('segm', {'AP'" in test, (config.name, test[-2000:])
        assert 'Total GFlops' in analyze and '| backbone.net.net ' in analyze, (config.name, analyze[-2000:])
        assert 'Parameter Count' in analyze, (config.name, analyze[-2000:])
