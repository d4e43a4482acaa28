"""Any checkpoint our backbones load, into a `RecViTClassifier`, strictly: timm's `pretrained=True` path.

    timm.create_model('srvit_small_patch16_224', pretrained=True,
                      pretrained_cfg_overlay=dict(file='deit_small_patch16_224.safetensors'))

Our models' `pretrained_cfg` has `custom_load=True`, so timm hands a `file` (.pth/.pt/.safetensors, also one timm
downloaded from a `url` or the hub) to `RecViTClassifier.load_pretrained`, which reads it through
`models.checkpoint.read_checkpoint` (weights only; a truncated, corrupt or foreign file, a pickled object or NaN/inf
weights is one error naming the file); an in-memory `state_dict` goes through `checkpoint_filter_fn`, timm's
`pretrained_filter_fn`. Both map it with `classifier_state_dict`:

* the backbone part through the backbone's own path (`checkpoint.convert_state_dict`: timm/DeiT key maps, mmengine
  and mmpretrain whole models, a dense backbone's keys; the load rules of `models/load_rules.py`: `pos_embed`
  resampled, a 3-channel patch embedding adapted to `in_chans`), then a strict check: a missing,
  unexpected or wrong-shape key is one `CheckpointError` listing them;
* the head (`head.weight`/`head.bias`, timm's and ours): loaded when its shape is the model's; another class count
  (timm's fine-tuning case: it drops such a head when `num_classes` differs from the config's) or none leaves the
  model's initialised head, said in the log.
"""

from __future__ import annotations

import logging

from torch import Tensor, nn

from ..models.checkpoint import (
    CheckpointError,
    convert_state_dict,
    read_checkpoint,
    state_dict_mismatch,
    whole_model_backbone,
)
from ..models.load_rules import adapt_to_model

logger = logging.getLogger('mmrecvit')
HEAD_KEYS = ('head.weight', 'head.bias')


def classifier_state_dict(model: nn.Module, state_dict: dict[str, Tensor], source: str) -> dict[str, Tensor]:
    """A checkpoint's state dict -> exactly the keys of `model` (a `RecViTClassifier`; module docstring)."""
    backbone = model.backbone
    rest = {k: v for k, v in state_dict.items() if k not in HEAD_KEYS}
    if rest and all(k.startswith('backbone.') for k in rest):  # ours (or a whole model's backbone alone)
        rest = {k[len('backbone.') :]: v for k, v in rest.items()}
    sd = adapt_to_model(convert_state_dict(backbone, whole_model_backbone(rest, source), source), backbone, source)
    message = state_dict_mismatch(backbone, sd, source)
    if message:
        raise CheckpointError(message)
    own = model.head.state_dict()  # {} without a head (num_classes=0)
    theirs = {k: state_dict[f'head.{k}'] for k in ('weight', 'bias') if f'head.{k}' in state_dict}
    shapes = {k: tuple(v.shape) for k, v in own.items()}
    head = theirs if theirs and {k: tuple(v.shape) for k, v in theirs.items()} == shapes else own
    if head is own and (own or theirs):
        found = tuple(theirs['weight'].shape) if 'weight' in theirs else None
        logger.info(
            f"{source}: the model keeps its own head (checkpoint's head.weight {found}, model's {shapes.get('weight')})"
        )
    return {**{f'backbone.{k}': v for k, v in sd.items()}, **{f'head.{k}': v for k, v in head.items()}}


def checkpoint_filter_fn(state_dict: dict[str, Tensor], model: nn.Module) -> dict[str, Tensor]:
    """timm's `pretrained_filter_fn` (an in-memory `pretrained_cfg_overlay=dict(state_dict=...)`)."""
    return classifier_state_dict(model, state_dict, 'pretrained state_dict')


def load_pretrained(model: nn.Module, path: str) -> None:
    """`custom_load`: a checkpoint file into `model` (a `RecViTClassifier`), strictly."""
    sd = classifier_state_dict(model, read_checkpoint(path), path)
    model.load_state_dict(sd, strict=True)
    logger.info(f'loaded {path!r} into {type(model.backbone).__name__} classifier ({len(sd)} tensors, strict)')
