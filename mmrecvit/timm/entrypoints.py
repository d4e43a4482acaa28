"""Every backbone x size as a timm model: `<method>_<size>_patch16_224` in timm's registry, built by timm's builder.

    import mmrecvit, timm
    timm.create_model('srvit_small_patch16_224', num_classes=100, drop_path_rate=0.1, num_recursions=2)
    timm.create_model('srvit_small_patch16_224', features_only=True, out_indices=(2, 5, 8, 11))
    timm.create_model('srvit_small_patch16_224', pretrained=True, pretrained_cfg_overlay=dict(file='deit_s.pth'))

Names are `<method>_<size>_patch16_224` for method in plainvit, naiverecvit, srvit, revit, edgerecvit, morvit
(and any backbone registered later) and size in tiny, small, base, large (`register_timm_models`, run by
`import mmrecvit`), so timm's own `train.py`/`validate.py` train and evaluate them (`--model
srvit_small_patch16_224`, `--model-kwargs num_recursions=2`). timm's ViT keywords are taken as `arguments.py` says
(`in_chans`, `class_token`, `dynamic_img_size`, ...); every other keyword is the backbone's. timm's
`build_model_with_cfg` builds them, as timm's ViTs:

* `pretrained_cfg`: DeiT's input (224, bicubic, crop 0.875, ImageNet mean/std); no weights were published, so
  `pretrained=True` needs `pretrained_cfg_overlay=dict(file=...)` (or `state_dict=`), loaded strictly through our
  key maps (`weights.py`); `checkpoint_path=` (timm's strict loader) takes the classifier's own checkpoints.
* `features_only=True`: timm's getter wrapper (`FeatureGetterNet`) around `forward_intermediates`; default
  `out_indices` the backbone's own (the ends of 4 equal stages, SR-ViT's units' ends: what the mm and d2 adapters
  return), not timm ViT's last three layers.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import timm
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.models import build_model_with_cfg, register_model, resolve_pretrained_cfg
from timm.models._features import FeatureGetterNet

from ..models import BACKBONES, on_register
from ..models.arguments import ARCH_SETTINGS
from ..version import __version__
from .arguments import backbone_keywords
from .classifier import POOLS, RecViTClassifier
from .weights import checkpoint_filter_fn

# short name -> backbone class name, of every registered backbone (`register_timm_models` keeps it current)
METHODS: dict[str, str] = {}
# timm's registry reads each entrypoint's `pretrained_cfg` from its module's `default_cfgs` (`register_model`)
default_cfgs: dict[str, dict[str, Any]] = {}


def _pretrained_cfg(backbone: str) -> dict[str, Any]:
    """timm's `pretrained_cfg` of our models. `description` and `notes` travel into the config.json timm's
    `save_for_hf` writes: a reader learns the library, its version and the import that registers the name."""

    return dict(
        url='',
        custom_load=True,  # see build_classifier
        num_classes=1000,
        input_size=(3, 224, 224),
        pool_size=None,
        crop_pct=0.875,
        interpolation='bicubic',
        fixed_input_size=False,
        mean=IMAGENET_DEFAULT_MEAN,
        std=IMAGENET_DEFAULT_STD,
        first_conv='backbone.patch_embed.proj',
        classifier='head',
        license='apache-2.0',
        description=f'{backbone} of mmrecvit {__version__}: `import mmrecvit` registers it in timm',
        notes=('library: mmrecvit', f'version: {__version__}', 'reload: import mmrecvit first (docs/timm.md)'),
    )


def _build(
    backbone: str,
    arch: str,
    in_channels: int,
    num_classes: int = 1000,
    global_pool: str = 'token',
    drop_rate: float = 0.0,
    in_chans: int = 3,
    **kwargs: Any,
) -> RecViTClassifier:
    """The model class timm's builder calls: timm's arguments mapped to ours. `in_channels` is the user's (taken by
    `build_classifier`); `in_chans` here is only the default timm's builder fills in from `pretrained_cfg`, left at
    3 so that its loader does not adapt the patch embedding a second time after our filter."""
    if global_pool not in POOLS:
        raise ValueError(f'global_pool must be one of {list(POOLS)}, got {global_pool!r}')
    net = BACKBONES[backbone](arch=arch, in_channels=in_channels, out_type=POOLS[global_pool], **kwargs)
    return RecViTClassifier(net, num_classes, global_pool, drop_rate)


def build_classifier(name: str, backbone: str, arch: str, *, pretrained: bool = False, **kwargs: Any) -> Any:
    """A timm entrypoint's body: `build_model_with_cfg` with our model, weights filter and feature wrapper."""
    channels, kwargs = backbone_keywords(name, kwargs)  # timm's ViT keywords (arguments.py)
    if kwargs.get('features_only') and not _getter(kwargs.get('feature_cls', 'getter')):
        raise ValueError(
            f'{name}: feature_cls={kwargs["feature_cls"]!r} cannot take our models: a layer of a recursive method has '
            "no module of its own (one block runs several layers); use feature_cls='getter' (the default here: "
            'forward_intermediates)'
        )
    # custom_load: a file goes to `RecViTClassifier.load_pretrained` (our reader and key maps); timm resets it
    # whenever the overlay names a weight source, unless it is set there
    overlay = {'custom_load': True, **(kwargs.pop('pretrained_cfg_overlay', None) or {})}
    cfg = resolve_pretrained_cfg(name, kwargs.get('pretrained_cfg'), overlay)
    if pretrained and not (cfg.has_weights or cfg.state_dict is not None):
        raise RuntimeError(
            f'{name}: no pretrained weights were published; load a checkpoint with pretrained_cfg_overlay=dict('
            'file=PATH) (.pth/.safetensors: timm/DeiT, e.g. deit_small_patch16_224 for the small size, ours, '
            "mmengine/mmpretrain) or checkpoint_path=PATH (this classifier's own), or make one: configs/cls/ or "
            'timm train.py (docs/timm.md, "Weights")'
        )
    return build_model_with_cfg(
        functools.partial(_build, backbone, arch, channels),
        name,
        pretrained,
        pretrained_cfg_overlay=overlay,
        pretrained_filter_fn=checkpoint_filter_fn,
        # out_indices None: the backbone's own (`RecViTClassifier.prune_intermediate_layers`)
        feature_cfg=dict(out_indices=None, feature_cls='getter'),
        **kwargs,
    )


def _getter(feature_cls: Any) -> bool:
    """Whether timm's `feature_cls` names its getter wrapper (a name, as timm reads it, or the class)."""
    if isinstance(feature_cls, str):
        return feature_cls.lower() == 'getter'
    return isinstance(feature_cls, type) and issubclass(feature_cls, FeatureGetterNet)


def _entrypoint(name: str, backbone: str, arch: str) -> Any:
    def fn(pretrained: bool = False, **kwargs: Any) -> Any:
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
        if timm.is_model(name):
            continue
        default_cfgs[name] = _pretrained_cfg(backbone)
        fn = _entrypoint(name, backbone, arch)
        setattr(module, name, fn)
        register_model(fn)


def register_timm_models() -> list[str]:
    """Register every backbone x size with timm, also the backbones registered later (`models.on_register`);
    returns the names."""
    on_register(_register)
    return [f'{method}_{arch}_patch16_224' for method in METHODS for arch in ARCH_SETTINGS]
