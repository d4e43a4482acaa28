"""Checkpoints between detectron2 models and the rest of mmrecvit, through the one strict filter.

In a detectron2 model the backbone's parameters keep their own names under `...net.` (see
`RecViTBackbone`), so every checkpoint the core reads loads here unchanged: an mmdet detector's
(`backbone.*` of an mmengine checkpoint), an mmpretrain/timm classifier's (head and final norm
dropped and listed), a DeiT/timm one (the method's key map). `export_backbone` writes the
backbone back as an mmengine-layout `backbone.*` checkpoint, which mmdet configs load with
`init_cfg=dict(type='Pretrained', checkpoint=PATH)` or `load_from`.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from ..models import ViTBackbone
from ..models.checkpoint import CheckpointError, load_pretrained


def recvit_backbone(model: nn.Module) -> ViTBackbone:
    """The one mmrecvit backbone inside a detectron2 model (or a `RecViTBackbone`)."""
    found = [m for m in model.modules() if isinstance(m, ViTBackbone)]
    if len(found) != 1:
        raise CheckpointError(f'expected one mmrecvit backbone in {type(model).__name__}, found {len(found)}')
    return found[0]


def load_backbone(model: nn.Module, path: str | os.PathLike, prefix: str | None = None) -> None:
    """Load a checkpoint file into the model's backbone, strictly (`models.checkpoint.load_pretrained`)."""
    load_pretrained(recvit_backbone(model), os.fspath(path), prefix=prefix)


def export_backbone(model: nn.Module, path: str | os.PathLike) -> None:
    """Write the model's backbone as `{'state_dict': {'backbone.<name>': tensor}}` (mmengine's layout)."""
    sd = recvit_backbone(model).state_dict()
    torch.save({'state_dict': {f'backbone.{k}': v.detach().cpu() for k, v in sd.items()}}, os.fspath(path))
