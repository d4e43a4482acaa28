"""timm's `VisionTransformer` keywords that code written for timm passes, taken with timm's meaning or as documented
no-ops (issue 46; docs/timm.md, "timm's ViT arguments").

    in_chans (ours: in_channels)        the image channels; 3-channel weights are adapted (`models/load_rules.py`)
    class_token                         our `with_cls_token`
    dynamic_img_size, dynamic_img_pad   no-ops, either value: our models always take any input size (the position
                                        embedding resampled to the input's grid, the image padded at the bottom/right
                                        to a multiple of the patch), what timm's ViT does with both True
    pos_drop_rate, patch_drop_rate,     timm's default 0 accepted; our blocks have no dropout (`drop_path_rate` is
    proj_drop_rate, attn_drop_rate      stochastic depth, `drop_rate` the head's dropout), so another value is an error
    qk_norm, proj_bias, no_embed_class, timm's default value, which is what our models are, accepted; another value
    reg_tokens, pre_norm, fc_norm,      is an error naming it (`TIMM_DEFAULTS`)
    pos_embed, weight_init, the layer
    classes, device, dtype, ...

`pretrained_strict` is timm's builder's own: our loads are strict whatever it says (a key that no rule of ours maps
is an error, never a silent skip). Every other keyword goes to the backbone, which names a misspelt one.
"""

from __future__ import annotations

from typing import Any

from timm.layers import Attention, Mlp, PatchEmbed
from timm.models.vision_transformer import Block

from ..models.checks import check_bool, check_int

NO_OPS = ('dynamic_img_size', 'dynamic_img_pad')
DROPOUTS = ('pos_drop_rate', 'patch_drop_rate', 'proj_drop_rate', 'attn_drop_rate')
# timm's VisionTransformer defaults that describe our models (norm_layer/act_layer None: LayerNorm eps 1e-6, GELU)
TIMM_DEFAULTS: dict[str, Any] = dict(
    qk_norm=False,
    scale_attn_norm=False,
    scale_mlp_norm=False,
    proj_bias=True,
    no_embed_class=False,
    reg_tokens=0,
    pre_norm=False,
    fc_norm=None,
    pool_include_prefix=False,
    pos_embed='learn',
    weight_init='',
    fix_init=False,
    embed_layer=PatchEmbed,
    embed_norm_layer=None,
    norm_layer=None,
    act_layer=None,
    block_fn=Block,
    mlp_layer=Mlp,
    attn_layer=Attention,
    device=None,
    dtype=None,
)


def backbone_keywords(name: str, kwargs: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(the image channels, the keywords left for the builder and the backbone) from timm's keywords (module
    docstring); `name` is the model's, for the errors."""
    kwargs = dict(kwargs)
    channels = _channels(name, kwargs.pop('in_chans', None), kwargs.pop('in_channels', None))
    for key in NO_OPS:
        if key in kwargs:
            check_bool(key, kwargs.pop(key))
    for key in DROPOUTS:
        if key in kwargs and kwargs.pop(key) not in (0, 0.0, None):
            raise ValueError(
                f"{name}: {key} must be 0 (timm's default): our blocks have no dropout; drop_path_rate is "
                'stochastic depth, drop_rate the dropout before the head'
            )
    for key, default in TIMM_DEFAULTS.items():
        if key in kwargs and kwargs.pop(key) != default:
            raise ValueError(f"{name}: {key} must be {default!r} (timm's default, what our models are)")
    if 'class_token' in kwargs:
        if 'with_cls_token' in kwargs:
            raise ValueError(f'{name}: pass class_token (timm) or with_cls_token (ours), not both')
        kwargs['with_cls_token'] = check_bool('class_token', kwargs.pop('class_token'))
    return channels, kwargs


def _channels(name: str, in_chans: int | None, in_channels: int | None) -> int:
    if in_chans is not None and in_channels is not None and in_chans != in_channels:
        raise ValueError(f'{name}: in_chans={in_chans} (timm) and in_channels={in_channels} (ours) differ; pass one')
    value = in_chans if in_chans is not None else in_channels
    return 3 if value is None else check_int('in_chans', value, 1)
