"""timm's own `train.py` and `validate.py` (of the pinned timm, 1.0.31) train and evaluate our backbones as timm
models, loaded with `--device-modules mmrecvit` (the README's commands), on the toy classification set.

The scripts are in neither timm's wheel nor its sdist (timm-1.0.31.tar.gz on the index holds `timm/` and `tests/`
only), and timm's repository cannot be reached from these machines: the test runs them from a source tree of
timm's repository at v1.0.31, `$MMRECVIT_TIMM_SOURCE` or `../shared/vendor/timm-1.0.31/`, and skips without one."""

import csv
import os
import sys
from pathlib import Path

import pytest
import timm
from helpers import REPO, run

pytestmark = pytest.mark.subprocess
VERSION = '1.0.31'  # requirements.txt
PLACES = [Path(REPO).parent / 'shared' / 'vendor' / f'timm-{VERSION}', Path('/work/shared/vendor') / f'timm-{VERSION}']


@pytest.fixture(scope='module')
def timm_source() -> Path:
    given = os.environ.get('MMRECVIT_TIMM_SOURCE')
    found = [p for p in ([Path(given)] if given else PLACES) if (p / 'train.py').is_file()]
    if not found:
        pytest.skip(
            f"timm's train.py/validate.py are not on this machine (not in timm's wheel or sdist): set "
            f'MMRECVIT_TIMM_SOURCE to a source tree of timm v{VERSION} (looked in '
            f'{given or ", ".join(map(str, PLACES))})'
        )
    version = (found[0] / 'timm' / 'version.py').read_text() if (found[0] / 'timm' / 'version.py').is_file() else ''
    assert f"'{VERSION}'" in version and timm.__version__ == VERSION, (
        f'{found[0]} is not timm {VERSION} (its timm/version.py: {version.strip()!r}; installed {timm.__version__})'
    )
    return found[0]


def test_timm_train_and_validate_run_an_srvit_on_the_toy_set(timm_source, toy_root, tmp_path):
    data = [
        '--data-dir',
        str(toy_root / 'toy_cls'),
        '--num-classes',
        '5',
        '--device',
        'cpu',
        '--workers',
        '0',
        '--batch-size',
        '4',
        '--img-size',
        '64',
        '--model',
        'srvit_tiny_patch16_224',
        '--model-kwargs',
        'num_recursions=2',
        '--device-modules',
        'mmrecvit',
    ]
    res = run(
        [
            sys.executable,
            str(timm_source / 'train.py'),
            *data,
            '--train-split',
            'train',
            '--val-split',
            'val',
            '--epochs',
            '1',
            '--warmup-epochs',
            '0',
            '--opt',
            'adamw',
            '--lr',
            '1e-3',
            '--no-aug',
            '--output',
            str(tmp_path),
            '--experiment',
            'toy',
        ],
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    (row,) = csv.DictReader((tmp_path / 'toy' / 'summary.csv').open())
    assert 0.0 <= float(row['eval_top1']) <= 100.0
    res = run(
        [
            sys.executable,
            str(timm_source / 'validate.py'),
            *data,
            '--split',
            'val',
            '--checkpoint',
            str(tmp_path / 'toy' / 'last.pth.tar'),
        ],
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert '"top1"' in res.stdout, res.stdout[-2000:]
