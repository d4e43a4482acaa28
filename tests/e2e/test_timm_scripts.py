"""timm's own `train.py` and `validate.py` train and score our backbones as timm models on the toy classification
set: train.py loads us with `--device-modules mmrecvit` (the README's command); validate.py has no such flag, so it
runs after `import mmrecvit` through `runpy` (docs/timm.md).

The scripts are in neither timm's wheel nor its sdist. They come from the vendored snapshot of timm's repository
(`../shared/vendor/pytorch-image-models-aa4b5850.tar.gz`, checked against that folder's SHA256SUMS first): only the
two scripts are unpacked, so that `import timm` in them is the pinned timm of requirements.txt, not the snapshot's
older source beside them. The test skips only where the tarball is absent (a machine without ../shared)."""

import csv
import json
import sys
from pathlib import Path

import pytest
from helpers import TIMM_SNAPSHOT, VENDOR_PLACES, extract_checked, run, vendored

pytestmark = pytest.mark.subprocess
SCRIPTS = ('train.py', 'validate.py')
# validate.py after `import mmrecvit` (it has no --device-modules); argv[1:] are its own arguments
VALIDATE = "import runpy, sys, mmrecvit; sys.argv[0] = 'validate.py'; runpy.run_path(sys.argv[0], run_name='__main__')"


def checked_scripts(vendor: Path, out: Path) -> Path:
    """`SCRIPTS` of the timm snapshot in `vendor`, unpacked into `out` after its SHA-256 matched vendor/SHA256SUMS."""
    return extract_checked(vendor, TIMM_SNAPSHOT, {name: name for name in SCRIPTS}, out)


@pytest.fixture(scope='module')
def timm_scripts(tmp_path_factory) -> Path:
    vendor = vendored(TIMM_SNAPSHOT)
    if vendor is None:
        places = list(map(str, VENDOR_PLACES))
        pytest.skip(f"timm's train.py/validate.py come from {TIMM_SNAPSHOT}, found in none of {places}")
    return checked_scripts(vendor, tmp_path_factory.mktemp('timm_scripts'))


def test_the_scripts_are_unpacked_without_the_snapshots_timm(timm_scripts):
    assert sorted(p.name for p in timm_scripts.iterdir()) == sorted(SCRIPTS)


def test_a_tampered_tarball_is_refused(tmp_path):
    vendor = vendored(TIMM_SNAPSHOT)
    if vendor is None:
        pytest.skip(f'{TIMM_SNAPSHOT} is not on this machine')
    data = bytearray((vendor / TIMM_SNAPSHOT).read_bytes())
    data[-1] ^= 0xFF  # one byte changed
    (tmp_path / TIMM_SNAPSHOT).write_bytes(bytes(data))
    (tmp_path / 'SHA256SUMS').write_text((vendor / 'SHA256SUMS').read_text())
    with pytest.raises(AssertionError, match='is not the one in SHA256SUMS'):
        checked_scripts(tmp_path, tmp_path / 'out')


def test_timm_train_and_validate_score_an_srvit_on_the_toy_set(timm_scripts, toy_root, tmp_path):
    data = ['--data-dir', str(toy_root / 'toy_cls'), '--num-classes', '5', '--device', 'cpu', '--workers', '0']
    model = ['--batch-size', '4', '--img-size', '64', '--model', 'srvit_tiny_patch16_224']
    model += ['--model-kwargs', 'num_recursions=2']
    train = ['--train-split', 'train', '--val-split', 'val', '--epochs', '2', '--warmup-epochs', '0', '--opt', 'adamw']
    train += ['--lr', '1e-3', '--layer-decay', '0.75', '--no-aug', '--output', str(tmp_path), '--experiment', 'toy']
    script = str(timm_scripts / 'train.py')
    res = run([sys.executable, script, *data, *model, *train, '--device-modules', 'mmrecvit'], cwd=timm_scripts)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    rows = list(csv.DictReader((tmp_path / 'toy' / 'summary.csv').open()))
    assert [int(r['epoch']) for r in rows] == [0, 1]
    trained = float(rows[-1]['eval_top1'])

    checkpoint = str(tmp_path / 'toy' / 'last.pth.tar')
    validate = [sys.executable, '-c', VALIDATE, *data, *model, '--split', 'val', '--checkpoint', checkpoint]
    res = run(validate, cwd=timm_scripts)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    result = json.loads(res.stdout[res.stdout.rindex('--result') + len('--result') :])
    # validate.py scores the checkpoint train.py wrote as train.py's own evaluation of its last epoch did
    assert result['model'] == 'srvit_tiny_patch16_224' and result['top1'] == pytest.approx(trained, abs=1e-6)
