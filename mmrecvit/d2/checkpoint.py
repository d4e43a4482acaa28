"""Checkpoints between detectron2 models and the rest of mmrecvit, through the one strict filter.

In a detectron2 model the backbone's parameters keep their own names under `...net.` (see
`RecViTBackbone`), so every checkpoint the core reads loads here unchanged: an mmdet detector's
(`backbone.*` of an mmengine checkpoint), an mmpretrain/timm classifier's (head and final norm
dropped and listed), a DeiT/timm one (the method's key map). `export_backbone` writes the
backbone back as an mmengine-layout `backbone.*` checkpoint, which mmdet configs load with
`init_cfg=dict(type='Pretrained', checkpoint=PATH)` or `load_from`.

detectron2's own `DetectionCheckpointer` (`train.init_checkpoint`, `--eval-only`, detectron2's tools) drops every
key whose shape differs from the model's before it calls `load_state_dict`, with a warning, and the model keeps its
initial tensor: a checkpoint trained at another `img_size` would run with the initial position embedding.
`apply_load_rules` (run by `import mmrecvit.d2`) makes it apply the load rules of `models/load_rules.py` to our
backbones' keys first (pos_embed resampled, 3-channel weights adapted to `in_channels`, each said in the log), and
refuse, in one line naming the keys, a wrong shape no rule covers, which detectron2 would drop with a warning.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import torch
from detectron2.checkpoint import DetectionCheckpointer
from fvcore.common.checkpoint import _strip_prefix_if_present
from torch import nn

from ..adapters import adapt_checkpoint
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


def _with_load_rules(load_model: Callable[..., Any]) -> Callable[..., Any]:
    """`DetectionCheckpointer._load_model` that first applies the load rules to our backbones' keys (module
    docstring); the rest is detectron2's."""

    @functools.wraps(load_model)
    def _load_model(self: DetectionCheckpointer, checkpoint: dict[str, Any]) -> Any:
        sd = checkpoint['model']
        self._convert_ndarray_to_tensor(sd)  # what detectron2 does first (a .pkl holds numpy arrays); in place
        _strip_prefix_if_present(sd, 'module.')
        checkpoint['model'] = adapt_checkpoint(self.model, sd, 'detectron2 checkpoint', refuse=True)
        return load_model(self, checkpoint)

    _load_model.applies_load_rules = True
    return _load_model


def apply_load_rules() -> None:
    """Make detectron2's `DetectionCheckpointer` apply the load rules (module docstring; idempotent)."""
    if not getattr(DetectionCheckpointer._load_model, 'applies_load_rules', False):
        DetectionCheckpointer._load_model = _with_load_rules(DetectionCheckpointer._load_model)
