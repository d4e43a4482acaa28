"""Where a backbone starts (issues 37.1, 45): `init_cfg`'s checkpoint loaded, a missing start file named with the
command that makes it, and a transfer that starts a method from a plain ViT's weights said to be one, naming the doc.

A plain ViT's weights (timm/DeiT, MAE, DINOv2) are a fair start only for a backbone that can be that ViT at its start:
PlainViT; SR-ViT with router_init='function' (its routers start on recursion 1: cosine 0.9998 to DeiT's function);
NaiveRecursiveViT with one block per layer (a PlainViT). The others share blocks the ViT does not, so its weights give
them a function far from the ViT's (cosine 0.37-0.54: docs/init_distance.md), which a comparison with PlainViT would
count against them; their fair starts are their own ImageNet checkpoints (docs/pretraining.md). SR-ViT does represent
one, but only with its recursions switched off (its routers on recursion 1, its step transforms zero): from there they
hardly get a gradient, and its paper starts from its own ImageNet-1k classifier; the DeiT start is a control.

The warnings are about a start for transfer (`init_cfg['purpose']`, default 'transfer': a dense recipe). A method's
own pretraining recipe that starts from a plain ViT ('pretraining': Edge-RecViT's paper fine-tunes DeiT) and a
distillation student ('distillation') start there on purpose, and say nothing.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from torch import nn

from .arguments import START_PURPOSES
from .checkpoint import is_timm_state_dict, load_pretrained, select_prefix
from .checkpoint_files import CheckpointError, has_scheme, load_checkpoint_file, unwrap_state_dict
from .checks import check_choice

DOCS = 'docs/pretraining.md'
KEYS = 'init_cfg.checkpoint / model.pretrained'  # where a config sets the start (mmseg passes its model.pretrained)


class UnrepresentableStartWarning(UserWarning):
    """A backbone starts from a plain ViT's weights that it cannot represent."""


def represents_plain_vit(model: nn.Module) -> bool:
    """Whether `model` starts as the plain ViT whose weights it loads (module docstring)."""
    name = type(model).__name__
    return (
        name == 'PlainViT'
        or (name == 'SRViT' and getattr(model, 'router_init', None) == 'function')
        or (name == 'NaiveRecursiveViT' and getattr(model, 'num_blocks', None) == getattr(model, 'depth', None))
    )


def starts_dormant(model: nn.Module) -> bool:
    """Whether `model` represents a plain ViT only with its own mechanism switched off (module docstring): SR-ViT
    with recursions, started as the ViT's function."""
    recursions = getattr(model, 'unit_recursions', (1,))
    return type(model).__name__ == 'SRViT' and represents_plain_vit(model) and max(recursions) > 1


def is_plain_vit_checkpoint(path: str, prefix: str | None = None) -> bool:
    """A timm/DeiT ViT state dict (read mapped: the keys only, not the tensors' bytes)."""
    sd = unwrap_state_dict(load_checkpoint_file(path, mmap=True), path)
    return is_timm_state_dict(select_prefix(sd, prefix, path) if prefix else sd)


def load_start(model: nn.Module, init_cfg: dict[str, Any]) -> None:
    """Load `init_cfg`'s checkpoint into `model` strictly (`load_pretrained`); a missing file is an error naming it and
    `init_cfg['made_by']`, the command that makes it; for a transfer (`init_cfg['purpose']`), a plain ViT's weights in
    a model that cannot represent them, or that represents them dormant (SR-ViT), are loaded with an
    `UnrepresentableStartWarning`."""
    path, prefix, name = init_cfg['checkpoint'], init_cfg.get('prefix'), type(model).__name__
    purpose = check_choice("init_cfg['purpose']", init_cfg.get('purpose', 'transfer'), START_PURPOSES)
    if not has_scheme(path) and not os.path.isfile(path):  # a URL is downloaded by timm's or mmengine's loaders
        how = f'; make it with: {init_cfg["made_by"]}' if init_cfg.get('made_by') else ''
        raise FileNotFoundError(f'the start checkpoint of {name} ({KEYS}), {path!r}, does not exist{how} ({DOCS})')
    try:
        load_pretrained(model, path, prefix=prefix, map_location=init_cfg.get('map_location', 'cpu'))
    except CheckpointError as e:
        raise CheckpointError(f'{KEYS}: {e}') from e
    if purpose != 'transfer' or not is_plain_vit_checkpoint(path, prefix):
        return
    if starts_dormant(model):
        warnings.warn(
            f"{name} starts from {path!r}, a plain ViT's weights, as that ViT's function: its routers on recursion 1 "
            'and its step transforms zero, so its recursions start nearly without gradient. Its paper starts from its '
            f'own ImageNet-1k classifier (configs/_base_/backbones/srvit-s_in1k.py); this start is a control ({DOCS}).',
            UnrepresentableStartWarning,
            stacklevel=2,
        )
    elif not represents_plain_vit(model):
        warnings.warn(
            f"{name} starts from {path!r}, a plain ViT's weights that {name} cannot represent: it starts far from "
            "that ViT's function (docs/init_distance.md), which a comparison with PlainViT counts against it. Its fair "
            f'start: its own ImageNet-1k checkpoint (a feature-distilled one is a DeiT-imitation control; {DOCS}).',
            UnrepresentableStartWarning,
            stacklevel=2,
        )
