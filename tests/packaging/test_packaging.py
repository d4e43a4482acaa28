"""`pip install mmrecvit` for each audience (issue 38). The core (torch + timm) imports and builds every model
whatever else is or is not installed; a wheel built with pip's standard front end carries the configs inside the
package; in a fresh venv (no system site-packages; torch from the package index pip is configured with, on this
machine's disk) that wheel alone runs every backbone and timm model, and with the OpenMMLab extra (`[mm]`:
mmcv-lite, nothing compiled) trains the toy detector two iterations from a config inheriting an installed one."""

import glob
import os
import os.path as osp
import shutil
import subprocess
import sys
import zipfile

import pytest
import torch
import torchvision
from helpers import REPO

import _mmrecvit_import_hook as import_hook

HERE = osp.dirname(osp.abspath(__file__))
FRAMEWORKS = ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'mmpretrain', 'detectron2')


def run(cmd, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=1800, env={**env, 'OMP_NUM_THREADS': '1'}, **kwargs
    )


def ok(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 0, f'{" ".join(map(str, res.args))}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}'
    return res.stdout


@pytest.mark.subprocess
@pytest.mark.parametrize(
    'absent', [['mmcv'], ['cv2'], list(FRAMEWORKS)], ids=['mmengine-without-mmcv', 'openmmlab-without-cv2', 'none']
)
def test_the_core_builds_every_model_whatever_else_is_missing(absent):
    """`mmengine` without `mmcv` is what `pip install mmrecvit` beside a bare mmengine gives (it used to stop
    in mmrecvit/mm/data.py's `import mmcv`); OpenMMLab without its cv2 is installed but does not import: one
    warning. The check makes the modules unimportable, as if not installed."""
    res = run([sys.executable, osp.join(HERE, 'check_core.py'), '--absent', *absent])
    out = ok(res)
    assert 'timm models:' in out and 'frameworks imported:' in out and 'OpenMMLab scopes registered: none' in out
    said = [line for line in res.stderr.splitlines() if 'mmrecvit: OpenMMLab is installed but does not import' in line]
    assert len(said) == (1 if absent == ['cv2'] else 0), res.stderr[-2000:]


def source_tree(dest: str) -> str:
    """The checkout's files as git sees them (tracked, and untracked but not ignored), copied: the build writes
    build/ and *.egg-info into the tree it builds."""
    files = ok(run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'], cwd=REPO)).split('\0')
    for name in filter(None, files):
        if osp.isfile(osp.join(REPO, name)):
            os.makedirs(osp.dirname(osp.join(dest, name)), exist_ok=True)
            with open(osp.join(REPO, name), 'rb') as src, open(osp.join(dest, name), 'wb') as dst:
                dst.write(src.read())
    return dest


@pytest.fixture(scope='module')
def wheel(tmp_path_factory):
    """`pip wheel` of the checkout, with build isolation (setuptools from the index), as a user builds it."""
    src = source_tree(str(tmp_path_factory.mktemp('src')))
    out = tmp_path_factory.mktemp('dist')
    ok(run([sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps', '-w', str(out), src]))
    (path,) = glob.glob(str(out / 'mmrecvit-*.whl'))
    return path


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_wheel_carries_every_config_inside_the_package_and_the_import_hook_at_the_top(wheel):
    configs = {osp.relpath(p, REPO) for p in glob.glob(osp.join(REPO, 'configs', '**', '*.py'), recursive=True)}
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert configs and {f'mmrecvit/.mim/{c}' for c in configs} <= names
    assert not any(n.startswith(('configs/', 'tests/', 'tools/')) for n in names)
    with zipfile.ZipFile(wheel) as z:  # the import hook and its line, at the top of site-packages (issue 46.5)
        assert z.read(import_hook.PTH_NAME).decode() == import_hook.PTH_LINE
        assert '_mmrecvit_import_hook.py' in z.namelist()


@pytest.fixture(scope='module')
def fresh_venv(tmp_path_factory, wheel):
    """A new venv with this torch and torchvision (from the configured index: this machine's disk), then the wheel
    with its own dependencies (timm)."""
    venv = tmp_path_factory.mktemp('venv')
    ok(run([sys.executable, '-m', 'venv', str(venv)]))
    python = str(venv / 'bin' / 'python')
    pins = [f'{m.__name__}=={m.__version__.split("+")[0]}' for m in (torch, torchvision)]
    ok(run([python, '-m', 'pip', 'install', '-q', '--no-compile', '--progress-bar', 'off', *pins, wheel]))
    yield python
    shutil.rmtree(venv)  # ~6 GB (torch with its CUDA libraries): gone once this module's tests are done


def installed(python) -> set[str]:
    out = ok(run([python, '-m', 'pip', 'list', '--format', 'freeze']))
    return {line.split('==')[0].lower() for line in out.split()}


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_wheel_alone_in_a_fresh_venv_runs_every_model(fresh_venv, tmp_path):
    """A timm user's install: nothing of OpenMMLab or detectron2 (run before the extra goes into the same venv)."""
    assert {'torch', 'timm', 'mmrecvit'} <= installed(fresh_venv)
    assert not installed(fresh_venv) & {'mmengine', 'mmcv', 'mmcv-lite', 'mmdet', 'detectron2'}
    out = ok(run([fresh_venv, osp.join(HERE, 'check_core.py')], cwd=tmp_path))
    assert 'site-packages/mmrecvit' in out and 'frameworks imported: none' in out


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_wheel_with_the_openmmlab_extra_trains_the_toy_detector(fresh_venv, wheel, tmp_path):
    ok(run([fresh_venv, '-m', 'pip', 'install', '-q', '--no-compile', '--progress-bar', 'off', f'{wheel}[mm]']))
    assert {'mmengine', 'mmcv-lite', 'mmdet', 'mmsegmentation', 'mmpretrain'} <= installed(fresh_venv)
    assert 'mmcv' not in installed(fresh_venv)  # nothing compiled
    out = ok(run([fresh_venv, osp.join(HERE, 'check_mm.py'), str(tmp_path)], cwd=tmp_path))
    assert 'ops: torchvision' in out and 'site-packages/mmrecvit/.mim/configs/det/' in out
    assert 'trained 2 iterations' in out
