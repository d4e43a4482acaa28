"""Every backbone as a timm image classifier, registered in timm's model registry.

    import mmrecvit, timm
    model = timm.create_model('srvit_small_patch16_224', num_classes=100, drop_path_rate=0.1)

Names are `<method>_<size>_patch16_224` for method in plainvit, naiverecvit, srvit, revit,
edgerecvit, morvit and size in tiny, small, base, large (`register_timm_models`, run by
`import mmrecvit`), so timm's own `train.py`/`validate.py` train and evaluate them
(`--model srvit_small_patch16_224`, `--model-kwargs num_recursions=2`). The model follows timm's
classifier API: `forward_features` (the final normalised tokens), `forward_head`,
`reset_classifier`, `get_classifier`, `set_grad_checkpointing`, `no_weight_decay`, and a
`pretrained_cfg` with DeiT's input (224, bicubic, crop 0.875, ImageNet mean/std).

The backbone is the attribute `backbone` (state dict keys `backbone.*`, `head.*`), so a checkpoint
of the classifier loads into the dense det/seg backbone through `load_pretrained` (the head and the
final norm are dropped and listed) and a dense backbone's checkpoint into `classifier.backbone`
(the final norm starts fresh). No public ImageNet weights exist for these methods:
`pretrained=True` is an error; train one (configs/cls/) or pass `checkpoint_path=`.
"""

from __future__ import annotations

import sys
from typing import Any

import timm
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.layers import trunc_normal_
from timm.models import register_model
from torch import Tensor, nn

from ..models import BACKBONES, ViTBackbone, on_register
from ..models.arguments import ARCH_SETTINGS

POOLS = {'token': 'cls_token', 'avg': 'avg_featmap'}  # timm's global_pool -> our out_type
# short name -> backbone class name, of every registered backbone (`register_timm_models` keeps it current)
METHODS: dict[str, str] = {}


class RecViTClassifier(nn.Module):
    """A backbone of ours with a linear head and timm's classifier API.

    Args:
        backbone: a backbone of ours, built with `out_type` from `global_pool`.
        num_classes: classes of the head (0: no head, `forward` gives the pooled features).
        global_pool: 'token' (the CLS token, DeiT's classifier) or 'avg' (mean of the patch tokens).
        drop_rate: dropout before the head (timm's `drop_rate`).
    """

    def __init__(
        self, backbone: ViTBackbone, num_classes: int = 1000, global_pool: str = 'token', drop_rate: float = 0.0
    ) -> None:
        super().__init__()
        if backbone.out_type not in POOLS.values():
            raise ValueError(
                f'the backbone of a classifier needs out_type in {list(POOLS.values())}, got {backbone.out_type!r}'
            )
        self.backbone = backbone
        self.num_features = self.embed_dim = backbone.embed_dim
        self.head_drop = nn.Dropout(drop_rate)
        self.reset_classifier(num_classes, global_pool)

    # ---- timm's classifier API ----------------------------------------------------------------
    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool: str | None = None) -> None:
        if global_pool is not None:
            if global_pool not in POOLS:
                raise ValueError(f'global_pool must be one of {list(POOLS)}, got {global_pool!r}')
            if global_pool == 'token' and not self.backbone.with_cls_token:
                raise ValueError("global_pool='token' needs a backbone with a CLS token")
            self.global_pool = global_pool
            self.backbone.out_type = POOLS[global_pool]
        self.num_classes = num_classes
        self.head = nn.Linear(self.embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        if num_classes > 0:
            trunc_normal_(self.head.weight, std=0.02)
            nn.init.zeros_(self.head.bias)

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        self.backbone.with_cp = enable

    def no_weight_decay(self) -> set[str]:
        return {'backbone.pos_embed', 'backbone.cls_token'}

    def forward_features(self, x: Tensor) -> Tensor:
        """(B, C, H, W) -> the final token states (B, N, D) after the final norm."""
        tokens, _ = self.backbone.forward_intermediates(x, 1, output_fmt='NLC')
        return tokens

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        x = self.head_drop(self.backbone.pool(x))
        return x if pre_logits else self.head(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(x))


def _pretrained_cfg(name: str, num_classes: int) -> dict[str, Any]:
    return dict(
        architecture=name,
        url='',
        num_classes=num_classes,
        input_size=(3, 224, 224),
        pool_size=None,
        crop_pct=0.875,
        interpolation='bicubic',
        fixed_input_size=False,
        mean=IMAGENET_DEFAULT_MEAN,
        std=IMAGENET_DEFAULT_STD,
        first_conv='backbone.patch_embed.proj',
        classifier='head',
    )


def build_classifier(
    name: str,
    backbone: str,
    arch: str,
    *,
    pretrained: bool = False,
    num_classes: int = 1000,
    global_pool: str = 'token',
    drop_rate: float = 0.0,
    in_chans: int = 3,
    **kwargs: Any,
) -> RecViTClassifier:
    """A timm entrypoint's body: timm's arguments mapped to ours (`in_chans` -> `in_channels`)."""
    for key in ('pretrained_cfg', 'pretrained_cfg_overlay', 'cache_dir'):
        kwargs.pop(key, None)  # timm passes these to every entrypoint; no hub weights exist here
    if pretrained:
        raise RuntimeError(
            f'{name}: no pretrained weights exist (none were published); train a classifier with '
            'configs/cls/ or pass checkpoint_path=... to timm.create_model'
        )
    if global_pool not in POOLS:
        raise ValueError(f'{name}: global_pool must be one of {list(POOLS)}, got {global_pool!r}')
    model = RecViTClassifier(
        BACKBONES[backbone](arch=arch, in_channels=in_chans, out_type=POOLS[global_pool], **kwargs),
        num_classes,
        global_pool,
        drop_rate,
    )
    model.pretrained_cfg = model.default_cfg = _pretrained_cfg(name, num_classes)
    return model


def _entrypoint(name: str, backbone: str, arch: str) -> Any:
    def fn(pretrained: bool = False, **kwargs: Any) -> RecViTClassifier:
        return build_classifier(name, backbone, arch, pretrained=pretrained, **kwargs)

    fn.__name__, fn.__qualname__, fn.__module__ = name, name, __name__
    fn.__doc__ = f'{backbone}, arch={arch!r}, patch 16, 224 px input (mmrecvit).'
    return fn


def _register(backbone: str, cls: type) -> None:
    """One backbone x every size as timm models `<short name>_<size>_patch16_224` (idempotent)."""
    METHODS[cls.short_name] = backbone
    module = sys.modules[__name__]
    for arch in ARCH_SETTINGS:
        name = f'{cls.short_name}_{arch}_patch16_224'
        if name in timm.list_models(name):
            continue
        fn = _entrypoint(name, backbone, arch)
        setattr(module, name, fn)
        register_model(fn)


def register_timm_models() -> list[str]:
    """Register every backbone x size with timm, also the backbones registered later (`models.on_register`);
    returns the names."""
    on_register(_register)
    return [f'{method}_{arch}_patch16_224' for method in METHODS for arch in ARCH_SETTINGS]
