"""Small fixes that let the OpenMMLab stack (mmengine 0.10.7, mmdet 3.3.0, mmseg 1.2.2, mmpretrain
1.2.0) run on current torch/numpy. Applied once by `import mmrecvit`; nothing in site-packages is edited.

Each fix says what breaks, why, and how it is fixed; `tests/test_compat.py` covers each one.

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
   own error. It is re-registered as `mmrecvit.models.checkpoint.load_checkpoint_file`, the one
   reader of our tools and backbones: `weights_only=True` explicitly, one error naming the file
   for a truncated/corrupt/foreign file, a refused pickled object or NaN/inf weights. A compat fix,
   not a hook, because the inferencers and `load_checkpoint` load outside any Runner.

numpy 2: no incompatibility was found on the det/seg paths we use (see `tests/test_compat.py`).

mmpretrain 1.2.0 with mmcv 2.1.0 / mmengine 0.10.7 / torch 2.14 / numpy 2: nothing beyond fix 1 was
needed on the classification paths we use: the toy classifiers train, test and infer through
tools/ (`tests/test_cls_tools.py`), and the ImageNet recipes' data path (RandomResizedCrop,
RandAugment, random erasing, RepeatAugSampler), Mixup/CutMix and loss run a backward
(`tests/test_cls_configs.py`). Its `mmpretrain::` base configs resolve through `pkg_resources` like
mmdet's (setuptools < 82); its unmet `modelindex` requirement is a packaging matter (requirements.txt).
"""
from __future__ import annotations

import importlib.util
import pickle

import numpy as np
import torch

_applied = False


def _history_buffer_getattr(obj: object, name: str) -> object:
    """`getattr` for the weights-only unpickler, limited to HistoryBuffer's statistics methods."""
    from mmengine.logging.history_buffer import HistoryBuffer

    # The four built-in statistics plus any registered with `HistoryBuffer.register_statistics`.
    allowed = {'min', 'max', 'current', 'mean', *HistoryBuffer._statistics_methods}
    if obj is HistoryBuffer and name in allowed:
        return getattr(obj, name)
    raise pickle.UnpicklingError(f'refusing getattr({obj!r}, {name!r}) while loading a checkpoint '
                                 '(only HistoryBuffer statistics methods are allowed)')


def mmengine_safe_globals() -> list:
    """The globals an mmengine training checkpoint needs, for `torch.serialization`."""
    from mmengine.logging.history_buffer import HistoryBuffer

    multiarray = np._core.multiarray if hasattr(np, '_core') else np.core.multiarray
    dtype_classes = [getattr(np.dtypes, n) for n in dir(np.dtypes) if n.endswith('DType')]
    return [HistoryBuffer, np.ndarray, np.dtype, multiarray._reconstruct, multiarray.scalar,
            *dtype_classes, (_history_buffer_getattr, 'builtins.getattr')]


def load_local_checkpoint(filename: str, map_location: object = None) -> object:
    """mmengine's local-file loader, through ours (fix 3)."""
    import os.path as osp

    from .models.checkpoint import load_checkpoint_file

    return load_checkpoint_file(osp.expanduser(filename), map_location='cpu' if map_location is None else map_location)


def apply() -> None:
    """Apply every fix once (idempotent)."""
    global _applied
    if _applied:
        return
    if importlib.util.find_spec('mmengine') is not None:
        torch.serialization.add_safe_globals(mmengine_safe_globals())
        from mmengine.runner.checkpoint import CheckpointLoader

        CheckpointLoader.register_scheme(prefixes='', loader=load_local_checkpoint, force=True)
    _applied = True
