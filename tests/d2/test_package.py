"""The detectron2 adapter is the only part of the package that needs detectron2, and says how to install it."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = pytest.mark.usefixtures('one_thread')


def test_without_detectron2_the_adapter_says_how_to_install_it(monkeypatch):
    for mod in [m for m in sys.modules if m == 'mmrecvit.d2' or m.startswith('mmrecvit.d2.')]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, 'detectron2', None)  # `import detectron2` raises ImportError
    with pytest.raises(ImportError, match=r'needs detectron2.*bash scripts/setup\.sh.*facebookresearch/detectron2'):
        importlib.import_module('mmrecvit.d2')


@pytest.mark.slow
@pytest.mark.subprocess
def test_nothing_else_in_the_package_needs_detectron2():
    """No module outside mmrecvit/d2 imports it, and all of them import with it blocked (mmpretrain itself
    imports detectron2 when it is installed, so the check blocks it rather than looks for it)."""
    for path in Path(REPO, 'mmrecvit').rglob('*.py'):
        if 'd2' not in path.relative_to(REPO).parts and not path.stem.endswith('_d2'):  # the harness's d2 dry run
            tree = ast.parse(path.read_text())
            names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
            names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
            assert not [n for n in names if n.split('.')[0] == 'detectron2'], path
    code = (
        'import importlib, pathlib, sys\n'
        'sys.modules["detectron2"] = None\n'
        'for f in sorted(pathlib.Path("mmrecvit").rglob("*.py")):\n'
        '    name = ".".join(f.with_suffix("").parts).removesuffix(".__init__")\n'
        '    if not name.startswith("mmrecvit.d2") and not name.endswith("_d2"):\n'
        '        importlib.import_module(name)\n'
    )
    res = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
