"""What a start checkpoint says about itself (issue 45): the ImageNet-1k top-1 measured on the model it holds and,
for Edge-RecViT, the Gumbel temperature it ended at, in the checkpoint's `meta['mmrecvit_start']`.

    StartMetaHook (the configs/cls recipes; mm/hooks/start_meta_hook.py): after the run's last validation, the
        top-1 it measured written into the last checkpoint;
    TemperatureScheduleHook: its temperature, at every save;
    read_start_meta(path) -> the dict, a `StartMetaError` naming the file where it holds none.

A public checkpoint (DeiT's release) has no such meta: its figures are its paper's (tools/analysis_tools/compare.py
says which). The file is read through `load_checkpoint_file` (weights only, mapped: its tensors are not read).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from ..models.checkpoint_files import load_checkpoint_file
from .hooks.atomic_checkpoint_hook import replace_atomically

META_KEY = 'mmrecvit_start'


class StartMetaError(ValueError):
    """A start checkpoint without the meta a comparison reads."""


def read_start_meta(path: str) -> dict[str, Any]:
    """`meta['mmrecvit_start']` of the checkpoint at `path`, or a `StartMetaError` naming the file."""
    obj = load_checkpoint_file(path, mmap=True)
    meta = obj.get('meta') if isinstance(obj, dict) else None
    found = meta.get(META_KEY) if isinstance(meta, dict) else None
    if not isinstance(found, dict):
        raise StartMetaError(
            f"start checkpoint {path!r} has no meta['{META_KEY}'] (its measured ImageNet-1k top-1): it was not made "
            'by its made_by command, whose recipe writes it (StartMetaHook)'
        )
    return dict(found)


def update_start_meta(checkpoint: dict[str, Any], **values: Any) -> None:
    """Add `values` to a checkpoint dict's `meta['mmrecvit_start']` (in place)."""
    checkpoint.setdefault('meta', {}).setdefault(META_KEY, {}).update(values)


def write_start_meta(path: str, **values: Any) -> None:
    """Add `values` to the `meta['mmrecvit_start']` of the checkpoint file at `path`, replaced atomically."""
    checkpoint = load_checkpoint_file(path)
    if not isinstance(checkpoint, dict):
        raise StartMetaError(f'{path!r} is not a checkpoint dict: no meta to write')
    update_start_meta(checkpoint, **values)
    tmp = f'{os.fspath(path)}.tmp'
    torch.save(checkpoint, tmp)
    replace_atomically(tmp, os.fspath(path))
