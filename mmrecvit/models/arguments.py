"""The arguments every backbone shares: sizes, outputs, the pretrained start, and old spellings.

Each check names the argument and what is allowed (`checks.py` holds the generic ones). The one
vocabulary (the same in every backbone, config and tool; `ViTBackbone` says it in full): `depth` is the
number of layers, `out_indices` the layers whose output states are returned.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from .checks import check_bool, check_choice, check_float, check_int, check_sequence

OUT_TYPES = ('featmap', 'cls_token', 'avg_featmap')
AMP_DTYPES = {None: None, 'bf16': torch.bfloat16, 'fp16': torch.float16}
# DeiT sizes (docs/methods/README.md, "One vocabulary"); `depth` is the number of layers L.
ARCH_SETTINGS: dict[str, dict[str, int]] = {
    'tiny': dict(embed_dim=192, num_heads=3, depth=12),
    'small': dict(embed_dim=384, num_heads=6, depth=12),
    'base': dict(embed_dim=768, num_heads=12, depth=12),
    'large': dict(embed_dim=1024, num_heads=16, depth=24),
}
ARCH_ALIASES = {'ti': 'tiny', 't': 'tiny', 's': 'small', 'b': 'base', 'l': 'large'}


def resolve_arch(arch: str, table: dict[str, dict[str, Any]] = ARCH_SETTINGS, **overrides: Any) -> dict[str, Any]:
    """Look `arch` up in a size table (aliases ti/s/b/l allowed); explicit overrides win."""
    if not isinstance(arch, str):
        raise TypeError(f'arch must be a str, one of {list(table)}, got {arch!r}')
    name = ARCH_ALIASES.get(arch.lower(), arch.lower())
    check_choice('arch', name, list(table))
    settings = dict(table[name])
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return settings


def resolve_sizes(arch: str, depth: int | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A method's sizes, resolved once for all six: `arch`'s row of the table (`resolve_arch`) with `depth` and the
    `embed_dim` / `num_heads` of `kwargs` overriding it. Those two are `ViTBackbone`'s (its docstring); they are
    taken out of `kwargs` here, so that the method hands the resolved sizes on with the rest."""
    overrides = dict(embed_dim=kwargs.pop('embed_dim', None), depth=depth, num_heads=kwargs.pop('num_heads', None))
    return resolve_arch(arch, **overrides)


def stage_ends(depth: int, num_stages: int = 4) -> tuple[int, ...]:
    """0-based index of the last layer of each of `num_stages` equal stages (12 -> 2, 5, 8, 11)."""
    return tuple(max(0, depth * (i + 1) // num_stages - 1) for i in range(num_stages))


def check_out_indices(value: Any, depth: int, name: str = 'out_indices') -> tuple[int, ...]:
    """Layers in [-depth, depth); negatives count from the end."""
    indices = check_sequence(name, value)
    out = []
    for i in indices:
        check_int(f'{name} entry', i, -depth, depth - 1)
        out.append(i % depth)
    return tuple(out)


def check_global_steps(value: Any, num_steps: int) -> tuple[int, ...] | None:
    """`global_steps`: None, or application steps in [0, num_steps)."""
    if value is None:
        return None
    steps = check_sequence('global_steps', value, min_len=0)
    return tuple(check_int('global_steps entry (an application step)', s, 0, num_steps - 1) for s in steps)


def check_sizes(embed_dim: Any, num_heads: Any, mlp_ratio: Any, patch_size: Any, img_size: Any) -> tuple:
    """(embed_dim, num_heads, mlp_ratio, patch_size, pretraining grid (h, w)) after their checks."""
    embed_dim, num_heads = check_int('embed_dim', embed_dim, 1), check_int('num_heads', num_heads, 1)
    if embed_dim % num_heads:
        raise ValueError(f'embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})')
    mlp_ratio = check_float('mlp_ratio', mlp_ratio, 0.0, math.inf, low_open=True)
    if int(embed_dim * mlp_ratio) < 1:
        raise ValueError(
            f'mlp_ratio must give an MLP of at least 1 hidden unit (embed_dim * mlp_ratio >= 1), '
            f'got embed_dim={embed_dim}, mlp_ratio={mlp_ratio}'
        )
    patch_size = check_int('patch_size', patch_size, 1)
    if isinstance(img_size, (str, bytes)) or not isinstance(img_size, (int, Sequence)):
        raise TypeError(
            f'img_size must be an int or (H, W), ints >= patch_size, got {type(img_size).__name__} {img_size!r}'
        )
    img_hw = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
    if len(img_hw) != 2:
        raise ValueError(f'img_size must be an int or (H, W), ints >= patch_size, got {img_size!r}')
    for v in img_hw:
        check_int('img_size', v, patch_size)
    return embed_dim, num_heads, mlp_ratio, patch_size, (img_hw[0] // patch_size, img_hw[1] // patch_size)


def check_outputs(out_type: Any, final_norm: Any, with_cls_token: bool) -> tuple[str, bool]:
    """(out_type, final_norm): final_norm None means 'only for the classification outputs'."""
    out_type = check_choice('out_type', out_type, OUT_TYPES)
    if out_type == 'cls_token' and not with_cls_token:
        raise ValueError("out_type='cls_token' needs with_cls_token=True")
    final_norm = out_type != 'featmap' if final_norm is None else check_bool('final_norm', final_norm)
    if out_type != 'featmap' and not final_norm:
        raise ValueError(
            f'out_type={out_type!r} reads the final state after the final norm: final_norm must be True (or None)'
        )
    return out_type, final_norm


# `made_by`: the command that makes the checkpoint, said when the file is missing (start.py); `purpose`: what the
# start is for, 'transfer' (default), 'pretraining' or 'distillation' (start.py: whether a plain ViT's weights warn).
INIT_CFG_KEYS = ('type', 'checkpoint', 'prefix', 'map_location', 'made_by', 'purpose')
START_PURPOSES = ('transfer', 'pretraining', 'distillation')


def resolve_init_cfg(pretrained: str | None, init_cfg: dict | None) -> dict | None:
    """mmseg's `pretrained=PATH` or `init_cfg=dict(type='Pretrained', checkpoint=PATH, prefix=None)` -> init_cfg."""
    if pretrained is not None and init_cfg is not None:
        raise ValueError(
            f'pass either pretrained or init_cfg, not both (pretrained={pretrained!r}, init_cfg={init_cfg!r})'
        )
    if pretrained is not None:
        if not isinstance(pretrained, str):
            raise TypeError(f'pretrained must be a checkpoint path (str) or None, got {pretrained!r}')
        return dict(type='Pretrained', checkpoint=pretrained)
    if init_cfg is None:
        return None
    if not isinstance(init_cfg, dict):
        raise TypeError(
            "init_cfg must be a dict like dict(type='Pretrained', checkpoint=PATH) "
            f'or None, got {type(init_cfg).__name__} {init_cfg!r}'
        )
    init_cfg = dict(init_cfg)
    check_choice("init_cfg['type']", init_cfg.get('type'), ['Pretrained'])
    if not isinstance(init_cfg.get('checkpoint'), str):
        raise ValueError(f"init_cfg['checkpoint'] must be a checkpoint path, got {init_cfg.get('checkpoint')!r}")
    unknown = set(init_cfg) - set(INIT_CFG_KEYS)
    if unknown:
        raise ValueError(f'init_cfg has unknown keys {sorted(unknown)}; allowed: {list(INIT_CFG_KEYS)}')
    check_choice("init_cfg['purpose']", init_cfg.get('purpose', 'transfer'), START_PURPOSES)
    return init_cfg


# Names retired for one meaning each (docs/methods/README.md, "One vocabulary"): old -> what says it now. Only the
# calls that accept the old spelling (`renamed`) and that table may still write them.
RETIRED = {
    'timm_init': 'shared_init (NaiveRecursiveViT, ReViT, MoRViT) or router_init (SRViT)',
    'timm_gates': 'router_init',
    'recursion_of_step': 'layer_recursions',
}


def renamed(owner: str, kwargs: dict[str, Any], old: str, new: str, value: Any, default: Any) -> Any:
    """`value` (the argument `new`), or the retired spelling `old` popped from `kwargs` with a `DeprecationWarning`
    (`deprecated`); both given with different values is an error naming both (docs/methods/README.md, retired names)."""
    given = deprecated(owner, kwargs, old, f'{new!r}')
    if given is None:
        return value
    if value != default and value != given:
        raise TypeError(f'{owner}: {old}={given!r} (retired) and {new}={value!r} disagree; pass {new} only')
    return given


def deprecated(owner: str, kwargs: dict[str, Any], old: str, new: str, how: str = '') -> Any:
    """Pop the old spelling `old` from `kwargs` (None if absent) with a `DeprecationWarning` naming `new`."""
    if old not in kwargs:
        return None
    warnings.warn(f'{owner}: {old!r} is deprecated; use {new} instead{how}', DeprecationWarning, stacklevel=3)
    return kwargs.pop(old)
