"""Small fixes that let the OpenMMLab stack (mmengine 0.10.7, mmdet 3.3.0, mmseg 1.2.2, mmpretrain
1.2.0) run on current torch/numpy. Applied once by `import mmrecvit.mm`; nothing in site-packages is edited.

Each fix says what breaks, why, and how it is fixed; `tests/mm/test_compat.py` covers each one.

1. `torch.load` defaults to `weights_only=True` since torch 2.6, and mmengine 0.10.7 calls it
   without the argument, so `--resume`, `load_from`, `tools/test.py` and the inferencers fail on
   every checkpoint the Runner wrote (`Unsupported global: mmengine...HistoryBuffer`; upstream
   mmengine#1655, fix unreleased). Its message hub pickles a `HistoryBuffer`, numpy arrays and
   scalars, and `getattr(HistoryBuffer, 'min')`-style references to the buffer's statistics
   methods. We allow-list exactly those for the weights-only unpickler, with `getattr` replaced
   by a version that only resolves HistoryBuffer's registered statistics methods (a free
   `getattr` would let a malicious file reach arbitrary objects). Checkpoints keep loading
   with `weights_only=True`: nothing becomes unsafe.

2. CPU-only distributed training (mmengine's `init_dist` calls `torch.cuda.set_device`, and
   its DDP wrapper is given CUDA `device_ids`) is handled where processes start, in
   `mmrecvit.mm.dist`, because it needs the launcher arguments.

3. mmengine's loader of local files (`CheckpointLoader`'s scheme '', used by `load_from`,
   `--resume`, `tools/test.py`, `load_checkpoint` and the mmdet/mmseg/mmpretrain inferencers) is a
   bare `torch.load(filename, map_location)`: weights-only only while torch's default says so
   (`TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1` turns it off), and a bad file ends in the unpickler's
   own error. It is re-registered as `mmrecvit.models.checkpoint_files.load_checkpoint_file`, the one
   reader of our tools and backbones: `weights_only=True` explicitly, one error naming the file
   for a truncated/corrupt/foreign file, a refused pickled object or NaN/inf weights. A compat fix,
   not a hook, because the inferencers and `load_checkpoint` load outside any Runner. Its downloads (`http(s)://`,
   and `open-mmlab://`, `torchvision://` through them) read with torch.hub's `load_state_dict_from_url`, whose default
   is `weights_only=False`: its module's `load_url` becomes `checkpoint_files.load_url`, the same cache read by ours.

4. mmengine resolves every `mmdet::`/`mmseg::`/`mmpretrain::` base config by first looking the name up
   among the package's model-index metafiles, which it re-parses (about 100 YAML files, pure-Python
   yaml) on every lookup, and by reloading `pkg_resources` in `is_installed` each time: 0.7 s per config
   of ours, 60 s for the 86 det/seg/cls configs. The index is built once per process and per package
   (`_metafile_index`; installed packages do not change under a running process) and the lookup
   answers from it exactly as mmengine's would (a name it does not list is a `ValueError`, which
   mmengine takes as "a `_base_` file": every lookup of ours ends there, as mmengine keys the index
   with '.py' and looks names up without it); `is_installed` asks `importlib.metadata`, then the import
   system, as mmengine does, without the reload. Same configs, ~6x faster.

5. mmpretrain 1.2.0 turns its multimodal models on (`WITH_MULTIMODAL`) whenever `transformers>=4.28` is
   installed, and their BLIP language model imports `apply_chunking_to_forward` and
   `find_pruneable_heads_and_indices` from `transformers.modeling_utils`, which transformers 5 removed: its
   bare `except` leaves `PreTrainedModel = None`, and `import mmpretrain.models` (hence `import mmdet.models`,
   whose ReID preprocessor imports mmpretrain's) fails with `TypeError: NoneType takes no arguments`. With
   transformers >= 5 installed (our `[hf]` extra), `WITH_MULTIMODAL` is set False before mmpretrain's models
   or datasets are imported, by whatever imports them first (`_mmrecvit_import_hook.py`): mmpretrain then registers its
   placeholders for BLIP, CLIP, Flamingo... (which say they need other dependencies when built), and everything
   else of mmpretrain, mmdet and mmseg imports.
6. The pinned stack's notices about its own internals, which a user of these configs can do nothing about, are
   silenced one by one (`QUIET_WARNINGS`: the module that warns, the category and the message; nothing else is
   filtered): setuptools' `pkg_resources` deprecation (mmengine and mmseg import it; we pin setuptools < 82
   knowingly), `torch.jit.script`'s deprecation (fvcore and detectron2 decorate functions with it at import,
   and mmdet imports detectron2), mmseg's `build_loss` and `reduce_zero_label` deprecations (its own heads and
   ADE20K pipeline), its "The draw is False" note (the visualization hook off, mmseg's default) and mmcv's
   ImportWarning that `MultiScaleDeformableAttention` moved. Everything else still warns.
7. mmcv-lite (the default set-up: mmcv without compiled ops, nothing to compile) has no `mmcv._ext`, so
   `import mmcv.ops`, hence `mmdet.models`/`mmdet.apis`/`mmseg.models`, fails. `mmrecvit.mm.mmcv_ext` provides the
   entry points our recipes reach from torchvision's kernels (CPU and CUDA) and is found as `mmcv._ext` only where
   no compiled one is installed (`_mmrecvit_import_hook.py`): a full mmcv is used as it is.

Fixes 5 and 7 must act before mmdet or mmpretrain imports, whoever imports them first: the import hook does, put
on `sys.meta_path` at interpreter start by a `.pth` file the wheel and scripts/setup.sh install, or by `apply()`.
8. mmengine resolves `<scope>::<file>` in `_base_` only for the OpenMMLab packages it lists, and gives the base's
   dicts that scope. `mmrecvit::<folder>/<file>.py` names one of our installed configs (`mmrecvit.configs`): it
   resolves to that file and inherits like a local `_base_` file (its dicts keep the scopes the file sets).
9. mmengine formats the whole config with yapf on every `Config.pretty_text`: three times as a Runner starts (the
   log, the dumped file, the visualizer), once more in its runtime-info hook and again in every checkpoint it
   saves, 1-3 s of CPU each (`tools/demo.py`'s two toy trainings formatted 26 times). Formatting is a function of
   the text and the style: each text is formatted once per process (`_format_once`), the same text returned.

numpy 2: no incompatibility was found on the det/seg paths we use (see `tests/mm/test_compat.py`).

mmpretrain 1.2.0 with mmcv 2.1.0 / mmengine 0.10.7 / torch 2.14 / numpy 2: nothing beyond fix 1 was
needed on the classification paths we use: the toy classifiers train, test and infer through
tools/ (`tests/e2e/test_cls.py`), and the ImageNet recipes' data path (RandomResizedCrop,
RandAugment, random erasing, RepeatAugSampler), Mixup/CutMix and loss run a backward
(`tests/configs/test_cls.py`). Its `mmpretrain::` base configs resolve through `pkg_resources` like
mmdet's (setuptools < 82); its unmet `modelindex` requirement is a packaging matter (requirements.txt).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os.path as osp
import pickle
import re
import warnings

import numpy as np
import torch

import _mmrecvit_import_hook

from .. import configs

_applied = False
_import_errors_said: set[str] = set()
# Fix 6: (module the warning is attributed to, category, start of its message).
QUIET_WARNINGS = (
    ('', UserWarning, 'pkg_resources is deprecated as an API'),
    ('torch.jit._script', FutureWarning, '`torch.jit.script` is deprecated'),
    ('mmseg.models.builder', UserWarning, '``build_loss`` would be deprecated soon'),
    ('mmseg.datasets.transforms.loading', UserWarning, '`reduce_zero_label` will be deprecated'),
    ('mmseg.engine.hooks.visualization_hook', UserWarning, 'The draw is False'),
    ('mmcv.cnn.bricks.transformer', ImportWarning, '``MultiScaleDeformableAttention`` has been moved'),
)


def _history_buffer_getattr(obj: object, name: str) -> object:
    """`getattr` for the weights-only unpickler, limited to HistoryBuffer's statistics methods."""
    from mmengine.logging.history_buffer import HistoryBuffer

    # The four built-in statistics plus any registered with `HistoryBuffer.register_statistics`.
    allowed = {'min', 'max', 'current', 'mean', *HistoryBuffer._statistics_methods}
    if obj is HistoryBuffer and name in allowed:
        return getattr(obj, name)
    raise pickle.UnpicklingError(
        f'refusing getattr({obj!r}, {name!r}) while loading a checkpoint '
        '(only HistoryBuffer statistics methods are allowed)'
    )


def mmengine_safe_globals() -> list:
    """The globals an mmengine training checkpoint needs, for `torch.serialization`."""
    from mmengine.logging.history_buffer import HistoryBuffer

    multiarray = np._core.multiarray if hasattr(np, '_core') else np.core.multiarray
    dtype_classes = [getattr(np.dtypes, n) for n in dir(np.dtypes) if n.endswith('DType')]
    return [
        HistoryBuffer,
        np.ndarray,
        np.dtype,
        multiarray._reconstruct,
        multiarray.scalar,
        *dtype_classes,
        (_history_buffer_getattr, 'builtins.getattr'),
    ]


def load_local_checkpoint(filename: str, map_location: object = None) -> object:
    """mmengine's local-file loader, through ours (fix 3)."""
    import os.path as osp

    from ..models.checkpoint_files import load_checkpoint_file

    return load_checkpoint_file(osp.expanduser(filename), map_location='cpu' if map_location is None else map_location)


@functools.cache
def _metafile_index(package_path: str) -> dict[str, dict]:
    """Config name (as mmengine keys it: the metafile `Config` without its first folder) -> its model
    entry, over every metafile of the package's `.mim/model-index.yml`; the first entry of a name wins,
    as in mmengine's `_get_cfg_metainfo`."""
    from mmengine.fileio import load

    index: dict[str, dict] = {}
    for meta_path in load(osp.join(package_path, '.mim', 'model-index.yml'))['Import']:
        for model in load(osp.join(package_path, '.mim', meta_path))['Models']:
            if 'Config' in model:
                index.setdefault(model['Config'].partition('/')[-1], model)
    return index


def cfg_metainfo(package_path: str, cfg_path: str) -> dict:
    """mmengine's `_get_cfg_metainfo` from the cached index (fix 4)."""
    index = _metafile_index(package_path)
    if cfg_path not in index:
        raise ValueError(f'{cfg_path!r} is not among the {len(index)} configs of the metafiles of {package_path}')
    return dict(index[cfg_path])


def is_installed(package: str) -> bool:
    """mmengine's `is_installed` without its `pkg_resources` reload (fix 4)."""
    try:
        importlib.metadata.distribution(package)
        return True
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec(package)
        return spec is not None and spec.origin is not None


def _format_once(format_code):
    """Fix 9: yapf's `FormatCode` as mmengine's config module calls it, each (text, style, options) formatted once
    per process (a failure is raised each time, not kept)."""
    formatted = {}

    @functools.wraps(format_code)
    def format_once(text, style_config=None, **kwargs):
        key = (text, repr(style_config), repr(sorted(kwargs.items())))
        if key not in formatted:
            formatted[key] = format_code(text, style_config=style_config, **kwargs)
        return formatted[key]

    return format_once


def quiet_warnings() -> None:
    """Fix 6: a filter per `QUIET_WARNINGS` entry, ahead of the filters already there."""
    for module, category, message in QUIET_WARNINGS:
        warnings.filterwarnings('ignore', message=re.escape(message), category=category, module=re.escape(module))


def _get_cfg_path(original):
    """mmengine's `Config._get_cfg_path` (a base config's path and scope), knowing `mmrecvit::` names (fix 8)."""

    def get_cfg_path(cfg_path: str, filename: str) -> tuple[str, str | None]:
        if cfg_path.startswith(configs.SCOPE):
            return configs.config_path(cfg_path), None
        return original(cfg_path, filename)

    return staticmethod(get_cfg_path)


@functools.cache
def unusable(*modules: str) -> str | None:
    """Why `modules` (e.g. 'mmengine.runner') cannot be used here, or None: one is not installed, or it is installed
    but does not import (a dependency of its own is missing, e.g. mmengine's and mmcv's cv2). The core of mmrecvit
    imports either way; an installed framework that does not import is said once, in a warning."""
    missing = [m for m in modules if importlib.util.find_spec(m.partition('.')[0]) is None]
    if missing:
        return f'{missing[0]} is not installed'
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError as e:
        if str(e) not in _import_errors_said:
            _import_errors_said.add(str(e))
            warnings.warn(
                f'mmrecvit: OpenMMLab is installed but does not import ({e}): its fixes and registration are off '
                '(docs/install.md#pip-the-core-and-the-extras)'
            )
        return f'{", ".join(modules)} installed but not importable ({e})'
    return None


def apply() -> None:
    """Apply every fix once (idempotent)."""
    global _applied
    if _applied:
        return
    quiet_warnings()
    _mmrecvit_import_hook.install()  # fixes 5 and 7, where no `.pth` installed it at start
    if unusable('mmengine.runner') is None:
        torch.serialization.add_safe_globals(mmengine_safe_globals())
        from mmengine.runner.checkpoint import CheckpointLoader

        CheckpointLoader.register_scheme(prefixes='', loader=load_local_checkpoint, force=True)
        import mmengine.runner.checkpoint as mm_checkpoint

        from ..models.checkpoint_files import load_url

        mm_checkpoint.load_url = load_url  # read by its `load_from_http` (fix 3)
        import mmengine.config.config as config_module
        import mmengine.config.utils as config_utils

        config_utils._get_cfg_metainfo = cfg_metainfo  # looked up by name in `_get_external_cfg_path`
        config_module.is_installed = is_installed  # `Config._get_cfg_path`'s own import of it
        config_module.Config._get_cfg_path = _get_cfg_path(config_module.Config._get_cfg_path)
        config_module.FormatCode = _format_once(config_module.FormatCode)
    _applied = True
