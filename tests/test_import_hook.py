"""mmrecvit's import hook (_mmrecvit_import_hook.py, issue 46.5): with the `.pth` that scripts/setup.sh and the
wheel install, mmcv-lite finds its ops and mmpretrain imports beside transformers 5 whatever is imported first.

Each order runs in a fresh interpreter that processes the `.pth` as site-packages' are at start (`site.addsitedir`
on a folder where `bash scripts/setup.sh --import-hook DIR` wrote it), so the shared venv is not touched."""

import importlib.metadata
import subprocess
import sys
from site import getsitepackages

import pytest
from helpers import REPO, SUBPROCESS_ENV

import _mmrecvit_import_hook as import_hook


def _distribution(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


LITE = _distribution('mmcv-lite') is not None
TRANSFORMERS_5 = int((_distribution('transformers') or '0').split('.')[0]) >= 5

# All the `.pth` may import at interpreter start: the hook's module and the standard library's import machinery
# (most of which is imported by then anyway).
START_MODULES = {
    '_mmrecvit_import_hook',
    '__future__',
    'importlib',
    'importlib._abc',
    'importlib.machinery',
    'importlib.util',
}
# What each fresh interpreter runs after its order: ours last (or again), then mmcv's NMS through mmcv's wrapper,
# mmpretrain's models through its registry, and what the hook did.
CHECK = """
import mmrecvit.mm, mmcv._ext, torch
from mmcv.ops import nms
from mmpretrain.registry import MODELS
import mmpretrain.utils.dependency as dependency
from mmrecvit.mm.mmcv_ext import backend
_, keep = nms(torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11]]), torch.tensor([0.9, 0.8]), 0.5)
classifier = MODELS.get('ImageClassifier').__name__  # imports mmpretrain.models
hooks = [f for f in sys.meta_path if getattr(f, 'mmrecvit_import_hook', False)]
print(backend(), keep.tolist(), len(hooks), sys.meta_path[0] is hooks[0], dependency.WITH_MULTIMODAL, classifier,
      mmcv._ext.nms is sys.modules['mmrecvit.mm.mmcv_ext'].nms)
"""
ORDERS = {
    'mmdet-inferencer-first': 'from mmdet.apis import DetInferencer',
    'mmdet-register-all-modules-first': 'from mmdet.utils import register_all_modules\nregister_all_modules()',
    'mmpretrain-first': 'import mmpretrain.models',
    'transformers-first': 'import transformers\nimport mmpretrain.models',
}


@pytest.fixture(scope='module')
def site_dir(tmp_path_factory):
    """A folder holding the `.pth`, written as scripts/setup.sh writes it into the venv."""
    folder = tmp_path_factory.mktemp('site-packages')
    res = subprocess.run(
        ['bash', f'{REPO}/scripts/setup.sh', '--import-hook', str(folder)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(folder / import_hook.PTH_NAME)
    return folder


def run_order(order: str, site: str) -> subprocess.CompletedProcess:
    """`order` then CHECK in a fresh interpreter with the `.pth` of `site`; site '': with no `.pth` processed at
    all (`-S`, site-packages put on the path by hand: the venv's own `.pth`, which setup.sh writes, must not act)."""
    if site:
        code, flags = f'import site, sys\nsite.addsitedir(sys.argv[1])\n{order}\n{CHECK}', []
    else:
        prefix = f'import sys\nsys.path += {[REPO, *getsitepackages()]!r}\n'
        code, flags = f'{prefix}{order}\n{CHECK}', ['-S']
    return subprocess.run(
        [sys.executable, *flags, '-c', code, site], capture_output=True, text=True, timeout=600, env=SUBPROCESS_ENV
    )


def test_setup_writes_one_line_that_installs_the_hook(site_dir):
    (line,) = (site_dir / import_hook.PTH_NAME).read_text().splitlines()
    assert line + '\n' == import_hook.PTH_LINE and line.startswith('import ')  # site.py runs `import` lines


@pytest.mark.subprocess
def test_at_start_the_hook_is_first_on_the_meta_path_and_imports_nothing(site_dir):
    code = (
        'import site, sys\nbefore = set(sys.modules)\nsite.addsitedir(sys.argv[1])\n'
        "print(getattr(sys.meta_path[0], 'mmrecvit_import_hook', False), *sorted(set(sys.modules) - before))"
    )
    res = subprocess.run([sys.executable, '-c', code, str(site_dir)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    first, *imported = res.stdout.split()
    assert first == 'True' and set(imported) <= START_MODULES, res.stdout


@pytest.mark.subprocess
@pytest.mark.parametrize('order', list(ORDERS), ids=list(ORDERS))
def test_the_import_order_does_not_matter(site_dir, order):
    if order == 'transformers-first' and _distribution('transformers') is None:
        pytest.skip('transformers is not installed (the [hf] extra)')
    res = run_order(ORDERS[order], str(site_dir))
    assert res.returncode == 0, res.stderr[-3000:]
    backend = 'torchvision' if LITE else 'compiled'
    assert res.stdout.split() == [backend, '[0]', '1', 'True', str(not TRANSFORMERS_5), 'ImageClassifier', str(LITE)]
    if order == 'mmdet-inferencer-first' and LITE:  # what the hook is for: without it, mmcv's own error
        bare = run_order(ORDERS[order], '')
        assert bare.returncode != 0 and "No module named 'mmcv._ext'" in bare.stderr
