"""A readable error for a bad checkpoint given to `tools/train.py` (`load_from`, `--resume`) or
`tools/test.py`, before mmengine loads it.

mmengine 0.10.7 hands the file to a bare `torch.load` deep inside `Runner.train()`; a truncated or
corrupt file then ends the run with a long traceback whose last line is torch's: an empty
`EOFError`, "PytorchStreamReader failed reading zip archive", or advice to retry with
`weights_only=False` (wrong, and unsafe). The tools call `check_checkpoint_to_load(cfg)` first:
it finds the file the Runner is going to load, maps it (`torch.load(mmap=True)`: the pickle is
read, the tensors are not, so a large checkpoint costs little) through the core's
`load_checkpoint_file`, and stops with one message naming the file and the problem. For
`--resume` it also checks that the file is a training checkpoint (mmengine's `meta` and
`state_dict`), not weights only. Remote paths (`http://`, `s3://`, ...) are left to mmengine.
"""
from __future__ import annotations

import os.path as osp
from typing import Any

from mmengine.runner.checkpoint import find_latest_checkpoint

from ..models.checkpoint import CheckpointError, load_checkpoint_file


def checkpoint_to_load(cfg: Any) -> tuple[str | None, bool]:
    """(path, resume): the file `Runner.load_or_resume()` will load for this config, as it decides."""
    resume, load_from = bool(cfg.get('resume', False)), cfg.get('load_from')
    if resume and load_from is None:
        return find_latest_checkpoint(cfg.work_dir), True
    return load_from, resume


def check_checkpoint_to_load(cfg: Any) -> None:
    """Raise `CheckpointError` / `FileNotFoundError` naming the file if it cannot be loaded (module docstring)."""
    path, resume = checkpoint_to_load(cfg)
    if path is None or '://' in str(path):
        return
    path = osp.expanduser(str(path))
    what = 'resume from' if resume else 'load'
    try:
        obj = load_checkpoint_file(path, mmap=True)
    except FileNotFoundError as e:
        raise FileNotFoundError(f'cannot {what} {path!r}: {e}') from e
    if resume and not (isinstance(obj, dict) and 'meta' in obj and 'state_dict' in obj):
        keys = sorted(obj)[:8] if isinstance(obj, dict) else type(obj).__name__
        raise CheckpointError(f'cannot resume from {path!r}: not a training checkpoint written by mmengine (it has no '
                              f"'meta'/'state_dict'; top-level keys {keys}). For weights only, use load_from or the "
                              "backbone's init_cfg instead of --resume")
