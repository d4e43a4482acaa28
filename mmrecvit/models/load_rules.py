"""What a loaded tensor of another shape becomes: the rules every load path applies, and the load pre-hook that
applies them inside `load_state_dict` itself (issue 46; docs/install.md, "Checkpoints").

A checkpoint made for another input grid or another channel count holds the same network. timm and mmpretrain load
it by a rule, and so do we, on every path: `init_cfg` (`checkpoint.load_pretrained`), mmengine's `load_from`,
tools/test.py and the inferencers, detectron2's checkpointer, timm's `pretrained=True`, `checkpoint_path=` and
`load_state_dict`:

    pos_embed                  another grid -> the model's, bicubic (timm's `resample_abs_pos_embed`)
    <block>.attn.rel_pos_h/_w  another length -> the model's, linear (ViTDet's `get_rel_pos`)
    patch_embed.proj.weight    3 input channels -> the model's `in_channels` (timm's `adapt_input_conv`: summed for
                               1 channel, else RGB repeated and scaled by 3/C)
    the pruned modules' keys   dropped (a model whose `out_indices` stop early is pruned at build, `pruning.py`)

Each change is one log line saying from what to what. Any other difference of shape is refused: one
`CheckpointError` line naming the keys, where mmengine and detectron2 would load the rest and keep the model's
initial tensor after a warning.

`watch_loads(backbone)` registers `load_pre_hook` (torch's `register_load_state_dict_pre_hook`): a `load_state_dict`
of any model holding the backbone (torch's, mmengine's own `load_state_dict`, timm's `load_checkpoint`) applies the
rules to the backbone's keys before a tensor is copied. detectron2's checkpointer drops wrong-shape keys before it
calls `load_state_dict`, so `mmrecvit.d2.checkpoint` applies `adapt_to_model` ahead of it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from timm.layers import resample_abs_pos_embed
from timm.models import adapt_input_conv
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from .checkpoint_files import CheckpointError
from .pruning import pruned_roots
from .rel_pos import resize

logger = logging.getLogger('mmrecvit')

# Relative position tables (ViTDet's, SAM's and ours: `<block>.attn.rel_pos_h` / `rel_pos_w`).
REL_POS_KEY = re.compile(r'^(.+\.)?attn\.rel_pos_[hw]$')
INPUT_CONV = 'patch_embed.proj.weight'
RULES = 'pos_embed is resampled, relative position tables resized and a 3-channel patch embedding adapted'


def resample_rel_pos(state_dict: dict[str, Tensor], model: nn.Module, source: str = 'checkpoint') -> dict[str, Tensor]:
    """Relative position tables whose length differs from the model's (a ViTDet checkpoint's global blocks:
    2*64 - 1) resized to it by linear interpolation (ViTDet's `get_rel_pos`); said in the log."""
    sd, said = _resample_rel_pos(state_dict, model)
    if said:
        logger.info(f'{source}: {said}')
    return sd


def adapt_to_model(
    state_dict: dict[str, Tensor], model: nn.Module, source: str = 'checkpoint', quiet: bool = False
) -> dict[str, Tensor]:
    """The three rules (module docstring) on a state dict of `model`'s own keys; each change one log line (none when
    `quiet`: a check before the load that will say it). Other keys and shapes are left to the caller's check."""
    sd = state_dict
    for rule in (_drop_pruned, _resample_pos_embed, _resample_rel_pos, _adapt_input_channels):
        sd, said = rule(sd, model)
        if said and not quiet:
            logger.info(f'{source}: {said}')
    return sd


def wrong_shapes(state_dict: dict[str, Tensor], model: nn.Module, prefix: str = '') -> list[str]:
    """'<prefix><key>: checkpoint <shape> vs model <shape>' for every key of both whose shapes differ."""
    own = model.state_dict()
    return [
        f'{prefix}{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}'
        for k, v in state_dict.items()
        if k in own and hasattr(v, 'shape') and v.shape != own[k].shape
    ]


def load_pre_hook(module: nn.Module, state_dict: dict[str, Any], prefix: str, *_: Any) -> None:
    """torch's load pre-hook: the rules on `module`'s keys of `state_dict` (in place, before torch or mmengine copies
    them); a wrong shape no rule covers is one `CheckpointError` naming the keys."""
    own = {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}
    source = f'load_state_dict ({prefix}*)' if prefix else 'load_state_dict'
    adapted = adapt_to_model(own, module, source)
    for k, v in adapted.items():
        if v is not own[k]:
            state_dict[prefix + k] = v
    for k in own.keys() - adapted.keys():  # a pruned module's (`_drop_pruned`)
        del state_dict[prefix + k]
    refuse_wrong_shapes(adapted, module, source, prefix)


def refuse_wrong_shapes(state_dict: dict[str, Tensor], model: nn.Module, source: str, prefix: str = '') -> None:
    """One `CheckpointError` line naming every key of `model` whose shape in `state_dict` (after the rules) differs."""
    bad = wrong_shapes(state_dict, model, prefix)
    if bad:
        raise CheckpointError(f'{source}: wrong shapes that no load rule covers ({RULES}): {"; ".join(bad)}')


def watch_loads(model: nn.Module) -> RemovableHandle:
    """Apply the rules in every `load_state_dict` that reaches `model` (`load_pre_hook`)."""
    return model.register_load_state_dict_pre_hook(load_pre_hook)


# ---- the rules: (state dict, what changed or '') ---------------------------------------------------------------
def _drop_pruned(state_dict: dict[str, Tensor], model: nn.Module) -> tuple[dict[str, Tensor], str]:
    """The keys of the modules pruned at build (`pruning.py`, timm's pruned `features_only` models load the same
    way): a full model's checkpoint loads into the pruned one."""
    pruned = getattr(model, 'pruned_keys', frozenset())
    dropped = [k for k in state_dict if k in pruned]
    if not dropped:
        return state_dict, ''
    sd = {k: v for k, v in state_dict.items() if k not in pruned}
    return sd, f'dropped {len(dropped)} tensors of {pruned_roots(dropped)}, pruned at build ({model.pruned_after})'


def _resample_pos_embed(state_dict: dict[str, Tensor], model: nn.Module) -> tuple[dict[str, Tensor], str]:
    pos, target = state_dict.get('pos_embed'), getattr(model, 'pos_embed', None)
    if pos is None or target is None or pos.shape == target.shape:
        return state_dict, ''
    n_prefix = getattr(model, 'num_prefix_tokens', 1)
    old = int(round(max(pos.shape[1] - n_prefix, 0) ** 0.5))
    if old * old != pos.shape[1] - n_prefix or pos.shape[2] != target.shape[2]:
        return state_dict, ''  # not a square grid of the same width: the caller's check refuses it
    new = list(model.pretrain_grid)
    sd = dict(state_dict)
    sd['pos_embed'] = resample_abs_pos_embed(pos, new_size=new, old_size=[old, old], num_prefix_tokens=n_prefix)
    return sd, f'resampled pos_embed from a {old}x{old} to a {new[0]}x{new[1]} grid (bicubic)'


def _resample_rel_pos(state_dict: dict[str, Tensor], model: nn.Module) -> tuple[dict[str, Tensor], str]:
    lengths = {k.rsplit('_', 1)[1]: v.shape for k, v in model.state_dict().items() if REL_POS_KEY.match(k)}
    sd, changed = dict(state_dict), []
    for k, v in state_dict.items():
        target = lengths.get(k.rsplit('_', 1)[1]) if REL_POS_KEY.match(k) else None
        if target is not None and v.ndim == 2 and v.shape[1] == target[1] and v.shape[0] != target[0]:
            sd[k], changed = resize(v.float(), target[0]).to(v.dtype), changed + [f'{k} {v.shape[0]}']
    if not changed:
        return state_dict, ''
    return sd, f'resized relative position tables (linear) to {[s[0] for s in lengths.values()]}: {changed}'


def _adapt_input_channels(state_dict: dict[str, Tensor], model: nn.Module) -> tuple[dict[str, Tensor], str]:
    weight, own = state_dict.get(INPUT_CONV), model.state_dict().get(INPUT_CONV)
    if weight is None or own is None or weight.shape == own.shape or weight.ndim != 4:
        return state_dict, ''
    channels = own.shape[1]
    if weight.shape[1] != 3 or weight.shape[0] != own.shape[0] or weight.shape[2:] != own.shape[2:]:
        return state_dict, ''  # timm's rule starts from RGB: the caller's check refuses the rest
    sd = {**state_dict, INPUT_CONV: adapt_input_conv(channels, weight)}
    how = 'summed over RGB' if channels == 1 else f'RGB repeated, scaled by 3/{channels}'
    return sd, f"adapted {INPUT_CONV} from 3 to {channels} input channels (timm's adapt_input_conv: {how})"
