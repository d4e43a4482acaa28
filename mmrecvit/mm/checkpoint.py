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
`state_dict`), not weights only. A location with a scheme (`https://`, `open-mmlab://`, ...) is downloaded first,
by the loaders mmengine then reads it through (`checkpoint_files.load_remote`: weights only, the same cache), so a
location that cannot be fetched is one error naming `load_from`.

Once the Runner is built, `check_checkpoint_matches_model` compares the file's keys and shapes with
the model's: mmengine loads `load_from`/`tools/test.py` checkpoints with `strict=False`, so a checkpoint
of another model would otherwise be evaluated as randomly initialised weights after a warning.
`--resume`, `tools/test.py` and the inferencers (tools/demo.py) need every key; a training `load_from`
(fine-tuning, e.g. another head) needs shapes that agree and at least one shared key. Shapes are compared after the
load rules (`models/load_rules.py`), which the backbones' load pre-hook applies when mmengine loads: a `pos_embed` of
another grid is resampled, 3-channel weights are adapted to the model's input channels.
"""

from __future__ import annotations

import os.path as osp
from typing import Any

from mmengine.model import BaseTTAModel, is_model_wrapper
from mmengine.runner.checkpoint import find_latest_checkpoint
from torch import nn

from ..adapters import adapt_checkpoint
from ..inputs import InputError
from ..models.checkpoint import CheckpointError, state_dict_mismatch
from ..models.checkpoint_files import has_scheme, load_checkpoint_file, unwrap_state_dict


def checkpoint_to_load(cfg: Any) -> tuple[str | None, bool]:
    """(path, resume): the file `Runner.load_or_resume()` will load for this config, as it decides."""
    resume, load_from = bool(cfg.get('resume', False)), cfg.get('load_from')
    if resume and load_from is None:
        return find_latest_checkpoint(cfg.work_dir), True
    return load_from, resume


def check_checkpoint_to_load(cfg: Any) -> None:
    """Raise `CheckpointError` / `InputError` naming the file if it cannot be loaded (module docstring)."""
    path, resume = checkpoint_to_load(cfg)
    if path is None:
        return
    path = str(path) if has_scheme(path) else osp.expanduser(str(path))
    what = 'resume from' if resume else 'load'
    try:
        obj = load_checkpoint_file(path, mmap=True)  # a URL: downloaded into the cache mmengine then reads
    except FileNotFoundError as e:
        raise InputError(f'cannot {what} {path!r}: {e}') from e
    except CheckpointError as e:
        if not has_scheme(path):
            raise
        raise CheckpointError(f'{"resume" if resume else "load_from"}: {e}') from e
    if resume and not (isinstance(obj, dict) and 'meta' in obj and 'state_dict' in obj):
        keys = sorted(obj)[:8] if isinstance(obj, dict) else type(obj).__name__
        raise CheckpointError(
            f'cannot resume from {path!r}: not a training checkpoint written by mmengine (it has no '
            f"'meta'/'state_dict'; top-level keys {keys}). For weights only, use load_from or the "
            "backbone's init_cfg instead of --resume"
        )


def check_checkpoint_matches_model(model: nn.Module, path: str | None, strict: bool) -> None:
    """Raise `CheckpointError` naming `path` if its state dict is not one of `model` (module docstring)."""
    if path is None:
        return
    path = str(path) if has_scheme(path) else osp.expanduser(str(path))
    model = model.module if is_model_wrapper(model) or isinstance(model, BaseTTAModel) else model  # as mmengine loads
    # the load rules first (pos_embed of another grid, 3-channel weights): the backbones' load pre-hook applies them
    sd = adapt_checkpoint(model, unwrap_state_dict(load_checkpoint_file(path, mmap=True), path), quiet=True)
    own = model.state_dict()
    shared = set(sd) & set(own)
    if strict or not shared or any(sd[k].shape != own[k].shape for k in shared):
        message = state_dict_mismatch(model, sd if strict else {k: sd[k] for k in shared}, repr(path), limit=8)
        if message or not shared:
            raise CheckpointError(message or f'{path!r} shares no key with {type(model).__name__}')
