"""mmrecvit's import hook, which makes the import order not matter (issue 46.5): mmcv finds its ops and mmpretrain
imports beside transformers 5 whether `mmrecvit.mm` is imported first, last or never.

One finder at the front of `sys.meta_path`, which answers three names and passes every other on:

* `mmcv._ext`, where no compiled one is found (mmcv-lite): the torchvision table of mmrecvit/mm/mmcv_ext.py, loaded
  from its file without running `mmrecvit`'s or `mmrecvit.mm`'s `__init__`: it is asked in the middle of
  `import mmcv.ops`, where registering into mmdet would meet mmdet half-imported. A compiled `mmcv._ext` (a full
  mmcv) is found by Python's own path finder first, and used.
* `mmpretrain.models` and `mmpretrain.datasets`, with transformers >= 5 installed: before either runs, mmpretrain's
  `WITH_MULTIMODAL` is set False, the fix mmrecvit/mm/compat.py (fix 5) describes, whatever imported mmpretrain
  first (`from mmdet.apis import DetInferencer`, mmdet's `register_all_modules()`, `import mmpretrain.models`).

A module of its own at the top of site-packages, as setuptools' `_distutils_hack`: `mmrecvit-import-hook.pth` beside
it (`PTH_LINE`) imports it at interpreter start, where importing `mmrecvit` would cost torch and timm. It imports
only the standard library's import machinery (its bytecode is cached as any module's) and reads nothing of mmrecvit
until one of the three names is imported. The wheel carries both files (setup.py, pyproject.toml); for the editable
install `bash scripts/setup.sh --import-hook` writes the `.pth`; `import mmrecvit.mm` installs the hook where no
`.pth` did (a checkout on PYTHONPATH: there import `mmrecvit.mm` before mmdet, mmseg or mmpretrain). Written by
hand: Python's import system has no other place to act before a module that is not ours runs.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os.path as osp
import sys

PTH_NAME = 'mmrecvit-import-hook.pth'
# The `.pth` line (site.py runs lines that start with `import`): a no-op where this module is gone.
PTH_LINE = (
    'import sys; exec("try:\\n    import _mmrecvit_import_hook as hook\\nexcept ImportError:\\n    pass\\n'
    'else:\\n    hook.install()")\n'
)
TABLE = 'mmrecvit.mm.mmcv_ext'  # the module of the torchvision table
MMPRETRAIN_READERS = ('mmpretrain.models', 'mmpretrain.datasets')  # the packages that read WITH_MULTIMODAL


def _transformers_major() -> int | None:
    import importlib.metadata  # here: ~70 modules (email, zipfile, ...) that interpreter start need not import

    try:
        return int(importlib.metadata.version('transformers').split('.')[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def _load_table():
    """`mmrecvit.mm.mmcv_ext`: imported where `mmrecvit.mm` is (being) imported; else its file, of the mmrecvit
    that `import mmrecvit` would import, run without its packages' `__init__` (`mmrecvit.mm` adopts it:
    `adopt_table`); None where mmrecvit is not installed."""
    if TABLE.rpartition('.')[0] in sys.modules:
        return importlib.import_module(TABLE)
    spec = importlib.util.find_spec('mmrecvit')
    if spec is None or not spec.submodule_search_locations:
        return None
    path = osp.join(list(spec.submodule_search_locations)[0], 'mm', 'mmcv_ext.py')
    table_spec = importlib.util.spec_from_file_location(TABLE, path)
    table = importlib.util.module_from_spec(table_spec)
    table_spec.loader.exec_module(table)
    return table


class MMRecViTImportHook:
    """The finder of the module docstring (`sys.meta_path[0]`)."""

    mmrecvit_import_hook = True  # how `installed` knows it
    table = None  # the torchvision table, once `mmcv._ext` was asked for

    def find_spec(self, name: str, path=None, target=None):
        if name == 'mmcv._ext':
            if importlib.machinery.PathFinder.find_spec(name, path) is not None:
                return None  # a compiled mmcv: its own module
            if self.table is None:
                self.table = _load_table()
            return None if self.table is None else self.table.MMCVExtFinder().find_spec(name, path, target)
        if name in MMPRETRAIN_READERS and (_transformers_major() or 0) >= 5:
            importlib.import_module('mmpretrain.utils.dependency').WITH_MULTIMODAL = False
        return None


def installed() -> MMRecViTImportHook | None:
    """The hook on `sys.meta_path`, if any."""
    return next((f for f in sys.meta_path if getattr(f, 'mmrecvit_import_hook', False)), None)


def install() -> None:
    """Put the hook at the front of `sys.meta_path` unless it is there (idempotent). With mmpretrain's
    `dependency` imported already and its models not yet, the flag is set now (what the hook would have done)."""
    if installed() is None:
        sys.meta_path.insert(0, MMRecViTImportHook())
    dependency = sys.modules.get('mmpretrain.utils.dependency')
    if dependency is not None and not any(m in sys.modules for m in MMPRETRAIN_READERS):
        if (_transformers_major() or 0) >= 5:
            dependency.WITH_MULTIMODAL = False


def adopt_table() -> None:
    """The table the hook loaded, if it did, is `mmrecvit.mm.mmcv_ext`: one module, not a second copy (run by
    `mmrecvit.mm`'s `__init__`, before anything imports that module)."""
    hook = installed()
    if hook is not None and hook.table is not None and TABLE not in sys.modules:
        package, _, name = TABLE.rpartition('.')
        sys.modules[TABLE] = hook.table
        setattr(sys.modules[package], name, hook.table)


def write_pth(site_dir: str) -> str:
    """Write `mmrecvit-import-hook.pth` into `site_dir` (a site-packages folder); returns its path."""
    path = osp.join(site_dir, PTH_NAME)
    with open(path, 'w') as f:
        f.write(PTH_LINE)
    return path


if __name__ == '__main__':  # `python -I _mmrecvit_import_hook.py [SITE_PACKAGES]`: what scripts/setup.sh runs
    import sysconfig

    print(write_pth(sys.argv[1] if len(sys.argv) > 1 else sysconfig.get_paths()['purelib']))
