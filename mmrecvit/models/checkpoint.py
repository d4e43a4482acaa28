"""Reading checkpoints and loading them onto our models, strictly (docs/methods/, "Initialisation from timm/DeiT").

One path for every model:

    read_checkpoint(path)                 file -> flat state dict, clear errors for bad files
                                          (`checkpoint_files.py`, also used by tools/ before mmengine loads)
    [select_prefix(sd, 'backbone.')]      a backbone out of a detector/segmentor checkpoint (init_cfg's prefix)
    whole_model_backbone(sd)              the `backbone.*` of an mmengine/mmpretrain whole-model checkpoint
                                          (the neck/head keys are dropped and listed)
    match_classification_keys(sd, model) the classification-only keys (head, final norm) the model lacks
                                          are dropped, those it has and the file lacks start fresh; listed
    is_timm_state_dict(sd)?               a timm/DeiT checkpoint (only timm ViT key names) ...
      adapt_prefix_tokens(sd, model)      ... DeiT III / distilled position layouts become ours,
      model.convert_timm_state_dict(sd)   ... and the model family's key map makes it ours
      fresh_rel_pos(model, sd)            ... a checkpoint without relative position tables (DeiT, MAE)
                                          leaves a `use_rel_pos` model's at zero (ViTDet's start), listed
    resample_rel_pos(sd, model)           tables of another size (ViTDet's 2*64-1) -> the model's, linear
    adapt_to_model(sd, model)             `load_rules.py`: pos_embed resampled (bicubic), rel. position tables
                                          resized, a 3-channel patch embedding adapted to the model's channels
    load_state_dict_strict(model, sd)     missing / unexpected / wrong-shape keys -> one error listing them
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from .checkpoint_files import CheckpointError, read_checkpoint
from .load_rules import REL_POS_KEY, adapt_to_model, resample_rel_pos

logger = logging.getLogger('mmrecvit')

# Keys of timm's VisionTransformer; a state dict with only these names is a timm/DeiT checkpoint.
TIMM_VIT_KEY = re.compile(
    r'^(cls_token|dist_token|reg_token|pos_embed|patch_embed\..+|blocks\.\d+\..+|'
    r'norm\..+|fc_norm\..+|head\..+|head_dist\..+|pre_logits\..+)$'
)
# Classification-only parts of a timm/DeiT checkpoint: a dense backbone has no use for them.
CLASSIFIER_KEY = re.compile(r'^(norm|fc_norm|head|head_dist|pre_logits)\.')
BLOCK_KEY = re.compile(r'^blocks\.(\d+)\.(.+)$')
# Top-level parts of an mmengine whole-model checkpoint besides its `*head`s (rpn_head, decode_head, ...).
MODEL_PARTS = ('backbone', 'neck', 'data_preprocessor')


def select_prefix(state_dict: dict[str, Tensor], prefix: str, source: str = 'checkpoint') -> dict[str, Tensor]:
    """Keys under `prefix` (e.g. 'backbone.'), with the prefix removed."""
    prefix = prefix if prefix.endswith('.') else prefix + '.'
    out = {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}
    if not out:
        top = sorted({k.split('.')[0] for k in state_dict})
        raise CheckpointError(f'{source} has no keys under prefix {prefix!r}; its top-level names are {top}')
    return out


def is_timm_state_dict(state_dict: dict[str, Tensor]) -> bool:
    return all(TIMM_VIT_KEY.match(k) for k in state_dict)


def whole_model_backbone(state_dict: dict[str, Tensor], source: str = 'checkpoint') -> dict[str, Tensor]:
    """The `backbone.*` part of a whole-model checkpoint (a detector, segmentor or mmpretrain
    classifier: every key under backbone., neck., data_preprocessor. or a *head.); other state
    dicts unchanged."""
    parts = {k.split('.', 1)[0] for k in state_dict}
    if 'backbone' not in parts or not all(p in MODEL_PARTS or p.endswith('head') for p in parts):
        return state_dict
    if parts != {'backbone'}:
        logger.info(
            f'{source}: a whole-model checkpoint: its backbone.* is loaded, {sorted(parts - {"backbone"})} are dropped'
        )
    return select_prefix(state_dict, 'backbone.', source)


def match_classification_keys(
    state_dict: dict[str, Tensor], model: nn.Module, source: str = 'checkpoint'
) -> dict[str, Tensor]:
    """Classification-only keys (`CLASSIFIER_KEY`: a head, a final norm) where the checkpoint and
    the model differ: dropped when the model has none (a classifier's into a dense backbone), taken
    from the model's own initialisation when the checkpoint has none (a dense backbone's into a
    classifier). Both are listed; every other key stays for the strict load."""
    own = model.state_dict()
    dropped = sorted(k for k in state_dict if CLASSIFIER_KEY.match(k) and k not in own)
    fresh = sorted(k for k in own if CLASSIFIER_KEY.match(k) and k not in state_dict)
    if dropped:
        logger.info(f'{source}: dropped classification-only keys {dropped}')
    if fresh:
        logger.info(f'{source}: kept at initialisation (classification-only, not in the checkpoint): {fresh}')
    sd = {k: v for k, v in state_dict.items() if k not in dropped}
    sd.update({k: own[k] for k in fresh})
    return sd


def adapt_prefix_tokens(state_dict: dict[str, Tensor], model: nn.Module) -> dict[str, Tensor]:
    """Make the checkpoint's prefix tokens (CLS, distillation) and their positions match the model.

    Our layout is original DeiT's: `pos_embed` holds one row per prefix token, then the grid.
    DeiT III stores positions for the grid only (CLS gets none): a zero row for CLS is the same
    model. A distilled DeiT's `dist_token` (and its position) is dropped, as is CLS for a model
    built with `with_cls_token=False`; each change is logged.
    """
    sd = dict(state_dict)
    pos = sd.get('pos_embed')
    if pos is None:
        return sd
    rows = [('cls', 'cls_token'), ('dist', 'dist_token')]
    present = [name for name, key in rows if key in sd]
    grid_rows = pos.shape[1] - len(present)
    if grid_rows < 0 or int(round(grid_rows**0.5)) ** 2 != grid_rows:
        if 'cls_token' in sd and int(round(pos.shape[1] ** 0.5)) ** 2 == pos.shape[1]:
            logger.info('pos_embed has no CLS row (DeiT III layout): inserting a zero row')
            pos = torch.cat([pos.new_zeros(1, 1, pos.shape[2]), pos], dim=1)
            present = ['cls']
            if 'dist_token' in sd:
                raise CheckpointError('pos_embed layout not understood: distillation token without positions')
        else:
            return sd  # leave it: the strict loader reports the shape mismatch
    prefix = pos[:, : len(present)]
    keep = []
    for i, name in enumerate(present):
        wanted = name == 'cls' and getattr(model, 'with_cls_token', True)
        if wanted:
            keep.append(prefix[:, i : i + 1])
        else:
            logger.info(f"dropping the checkpoint's {name} token and its position (the model has none)")
            sd.pop(f'{name}_token')
    sd['pos_embed'] = torch.cat(keep + [pos[:, len(present) :]], dim=1)
    return sd


def fresh_rel_pos(model: nn.Module, state_dict: dict[str, Tensor], source: str = 'checkpoint') -> dict[str, Tensor]:
    """No relative position tables in the checkpoint (DeiT, MAE), a model with them: its zero tables are added
    (the function is unchanged) and listed; a partial set is left to the strict load (an error)."""
    own = [k for k in model.state_dict() if REL_POS_KEY.match(k)]
    if not own or any(REL_POS_KEY.match(k) for k in state_dict):
        return state_dict
    logger.info(f'{source}: kept at initialisation (zero; not in the checkpoint): relative position tables {own}')
    return {**state_dict, **{k: v for k, v in model.state_dict().items() if k in own}}


def split_timm_blocks(state_dict: dict[str, Tensor]) -> tuple[dict[str, Tensor], list[dict[str, Tensor]]]:
    """Split `blocks.<i>.<name>` keys into a list of per-block dicts; return (rest, blocks)."""
    rest, by_index = {}, {}
    for k, v in state_dict.items():
        m = BLOCK_KEY.match(k)
        if m:
            by_index.setdefault(int(m.group(1)), {})[m.group(2)] = v
        else:
            rest[k] = v
    if sorted(by_index) != list(range(len(by_index))):
        raise CheckpointError(f'checkpoint blocks are not numbered 0..n-1: {sorted(by_index)}')
    return rest, [by_index[i] for i in range(len(by_index))]


def average_blocks(blocks: Sequence[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Parameter-wise mean of several blocks (MoR's "average the tied layers")."""
    return {k: torch.stack([b[k] for b in blocks]).mean(0) for k in blocks[0]}


def pick_or_average_blocks(
    blocks: Sequence[dict[str, Tensor]], groups: Sequence[Sequence[int]], mode: str, prefix: str
) -> dict[str, Tensor]:
    """Unique block j <- the first block of `groups[j]` ('pick') or the group's mean ('average')."""
    out = {}
    for j, group in enumerate(groups):
        src = blocks[group[0]] if mode == 'pick' else average_blocks([blocks[i] for i in group])
        out.update({f'{prefix}.{j}.{k}': v for k, v in src.items()})
    return out


def fresh_parameters(model: nn.Module, state_dict: dict[str, Tensor], pattern: str) -> dict[str, Tensor]:
    """Add the model's own (freshly initialised) entries matching `pattern` to `state_dict`.

    For method-specific parameters a timm checkpoint cannot have (routers, step transforms);
    they keep their zero/small initialisation (each method's note, docs/methods/). The keys are logged.
    """
    regex = re.compile(pattern)
    own = {k: v for k, v in model.state_dict().items() if regex.match(k) and k not in state_dict}
    if own:
        roots = sorted({k.rsplit('.', 2)[0] if k.count('.') > 1 else k for k in own})
        logger.info(f'kept at initialisation (not in a timm checkpoint): {roots}')
    return {**state_dict, **own}


def state_dict_mismatch(
    model: nn.Module, state_dict: dict[str, Tensor], source: str = 'checkpoint', limit: int | None = None
) -> str | None:
    """The message listing every missing, unexpected and wrong-shape key (at most `limit` of each), or None."""
    own = model.state_dict()
    missing = sorted(set(own) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(own))
    shapes = sorted(
        f'{k}: checkpoint {tuple(state_dict[k].shape)} vs model {tuple(own[k].shape)}'
        for k in set(own) & set(state_dict)
        if own[k].shape != state_dict[k].shape
    )
    if not (missing or unexpected or shapes):
        return None
    parts = [f'{source} does not match {type(model).__name__}:']
    for title, keys in (('missing keys', missing), ('unexpected keys', unexpected), ('wrong shapes', shapes)):
        if keys:
            more = f', ... ({len(keys) - limit} more)' if limit is not None and len(keys) > limit else ''
            parts.append(f'  {title} ({len(keys)}): ' + ', '.join(keys[:limit]) + more)
    return '\n'.join(parts)


def load_state_dict_strict(model: nn.Module, state_dict: dict[str, Tensor], source: str = 'checkpoint') -> None:
    """`load_state_dict(strict=True)` with one error listing every missing, unexpected and
    wrong-shape key."""
    message = state_dict_mismatch(model, state_dict, source)
    if message:
        raise CheckpointError(message)
    model.load_state_dict(state_dict, strict=True)


def convert_state_dict(
    model: nn.Module, state_dict: dict[str, Tensor], source: str = 'checkpoint'
) -> dict[str, Tensor]:
    """Our own keys pass through; a timm/DeiT state dict goes through the model's key map (and gets zero
    relative position tables when it has none). A whole-model checkpoint gives its backbone;
    classification-only keys are matched to the model; relative position tables are resized to the model's."""
    sd = match_classification_keys(whole_model_backbone(state_dict, source), model, source)
    sd = resample_rel_pos(sd, model, source)  # before a key map that may average tables of several blocks
    if not is_timm_state_dict(sd):
        return sd
    sd = adapt_prefix_tokens(sd, model)
    sd = sd if set(sd) == set(model.state_dict()) else model.convert_timm_state_dict(sd)
    return fresh_rel_pos(model, sd, source)


def load_state_dict_into(model: nn.Module, state_dict: dict[str, Tensor], source: str = 'checkpoint') -> None:
    """A timm/DeiT or mmrecvit state dict into `model`: key map, the load rules (`load_rules.py`: pos_embed
    resampled, input channels adapted), strict load."""
    sd = adapt_to_model(convert_state_dict(model, state_dict, source), model, source)
    load_state_dict_strict(model, sd, source)
    logger.info(f'loaded {source!r} into {type(model).__name__} ({len(sd)} tensors, strict)')


def load_pretrained(
    model: nn.Module, checkpoint: str, prefix: str | None = None, map_location: str | torch.device = 'cpu'
) -> None:
    """Load a timm/DeiT or mmrecvit checkpoint file into `model`, strictly (see the module docstring)."""
    sd = read_checkpoint(checkpoint, map_location)
    if prefix:
        sd = select_prefix(sd, prefix, checkpoint)
    load_state_dict_into(model, sd, checkpoint)


def timm_architecture(sd: dict[str, Tensor]) -> dict[str, Any]:
    """The `timm.models.vision_transformer.VisionTransformer` arguments that hold a timm/DeiT state
    dict (the number of heads is not in the weights: see `timm_vit`), plus `distilled`."""
    missing = [k for k in ('pos_embed', 'patch_embed.proj.weight', 'blocks.0.mlp.fc1.weight') if k not in sd]
    if missing:
        raise CheckpointError(f'not a timm/DeiT ViT checkpoint: no {missing}')
    proj = sd['patch_embed.proj.weight']  # (D, C, p, p)
    dim, patch = proj.shape[0], proj.shape[-1]
    depth = 1 + max(int(BLOCK_KEY.match(k).group(1)) for k in sd if BLOCK_KEY.match(k))
    prefix = int('cls_token' in sd) + int('dist_token' in sd)
    rows = sd['pos_embed'].shape[1]
    side = int(round((rows - prefix) ** 0.5))
    no_embed_class = side * side != rows - prefix  # DeiT III: positions for the grid only
    if no_embed_class:
        side = int(round(rows**0.5))
    return dict(
        embed_dim=dim,
        patch_size=patch,
        depth=depth,
        img_size=side * patch,
        in_chans=proj.shape[1],
        mlp_ratio=sd['blocks.0.mlp.fc1.weight'].shape[0] / dim,
        qkv_bias='blocks.0.attn.qkv.bias' in sd,
        class_token='cls_token' in sd,
        no_embed_class=no_embed_class,
        init_values=1e-5 if 'blocks.0.ls1.gamma' in sd else None,
        distilled='dist_token' in sd,
    )


def timm_vit(sd: dict[str, Tensor], num_heads: int) -> nn.Module:
    """timm's `VisionTransformer` holding a timm/DeiT state dict (its final norm too; the
    classifier dropped), in eval mode: the reference our conversions are checked against."""
    from timm.models.vision_transformer import VisionTransformer  # timm.models is heavy; only reference checks need it

    arch = timm_architecture(sd)
    if arch.pop('distilled'):
        raise CheckpointError('a distilled DeiT checkpoint (dist_token) has no plain timm VisionTransformer twin')
    ref = VisionTransformer(num_heads=num_heads, num_classes=0, **arch)
    weights = {k: v for k, v in sd.items() if not k.startswith(('head.', 'head_dist.', 'pre_logits.'))}
    # A checkpoint without a final norm keeps timm's identity-initialised one.
    weights.update({k: v for k, v in ref.state_dict().items() if CLASSIFIER_KEY.match(k) and k not in weights})
    load_state_dict_strict(ref, weights, 'timm reference')
    return ref.eval()
