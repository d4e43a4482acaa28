"""Building a `ModelSpec` into a `BenchModel`: the module, what is timed, and its FLOP count.

* a backbone of ours: `forward(images)`, all the maps it returns for its out_indices;
* a timm model: `forward_intermediates(x, indices=<ends of 4 equal stages>, intermediates_only=True)`
  when it has one -- patch embedding, every block, 4 NCHW maps, no final norm or head: the same
  work as our backbones' `forward` -- else `forward_features`;
* a config: its backbone (kwargs override `cfg.model.backbone`), or with `whole=True` the whole
  detector/segmentor/classifier through mmdet's, mmseg's or mmpretrain's registry (`model(inputs,
  data_samples, mode='tensor')`; the data preprocessor runs once per batch, untimed).

The harness kwargs `forced_mean_depth` / `forced_depth_seed` are taken out of the kwargs before
the model is built and applied to the built module (`forcing.py`).
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..models.checks import closest
from ..models.flops import conv_work, dense_work, total_flops
from .forcing import force_mean_depth, pop_depth_forcing
from .specs import ModelSpec, SpecError

WHOLE_MODES = ('tensor', 'predict')
# The data sample class of each framework: (module, class name).
DATA_SAMPLES = {
    'mmdet': ('mmdet.structures', 'DetDataSample'),
    'mmseg': ('mmseg.structures', 'SegDataSample'),
    'mmpretrain': ('mmpretrain.structures', 'DataSample'),
}


@dataclass
class BenchModel:
    """A built model and how the harness runs it.

    prepare: shared image batch (B, 3, H, W) -> what `run` takes (called once per batch, untimed).
    run: one forward (the timed call).
    flops: analytic FLOPs per image of the last forward, or None.
    timed: what exactly is timed, in words (printed under the table).
    """

    spec: ModelSpec
    module: nn.Module
    prepare: Callable[[Tensor], Any]
    run: Callable[[Any], Any]
    flops: Callable[[], float | None]
    timed: str

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def num_params(self) -> int:
        return sum(p.numel() for p in self.module.parameters())


def _backbones() -> dict[str, type]:
    # Looked up at build time: the dict grows as backbones are added.
    from mmrecvit.models import BACKBONES

    return BACKBONES


def _pop_forcing(spec: ModelSpec, kwargs: Any) -> dict[str, Any]:
    try:
        return pop_depth_forcing(kwargs)
    except ValueError as e:
        raise SpecError(f'model spec {spec.text!r}: {e}') from None


def _apply_forcing(spec: ModelSpec, module: nn.Module, forcing: dict[str, Any]) -> nn.Module:
    if forcing:
        try:
            force_mean_depth(module, **forcing)
        except (TypeError, ValueError) as e:
            raise SpecError(f'model spec {spec.text!r}: {e}') from e
    return module


def _build_our_backbone(spec: ModelSpec, name: str, kwargs: dict[str, Any]) -> nn.Module:
    table = _backbones()
    if name not in table:
        near = closest(name, list(table))
        hint = f'closest: {", ".join(near)}' if near else f'registered: {", ".join(table)}'
        raise SpecError(f'model spec {spec.text!r}: unknown backbone {name!r}; {hint}')
    kwargs = dict(kwargs)  # the spec's own dict stays as parsed
    forcing = _pop_forcing(spec, kwargs)
    try:
        module = table[name](**kwargs)
    except (TypeError, ValueError) as e:
        raise SpecError(f'model spec {spec.text!r}: {name}(**{kwargs!r}) failed: {e}') from e
    return _apply_forcing(spec, module, forcing)


def _identity(x: Tensor) -> Tensor:
    return x


def backbone_flops(output: Any) -> float | None:
    """FLOPs per image of the forward of one of our backbones whose result is `output` (its `stats.flops`,
    `models/flops.py`); None for an output that carries no statistics."""
    stats = getattr(output, 'stats', None)
    return None if stats is None else float(stats.flops)


def timm_vit_flops(model: nn.Module, hw: Sequence[int]) -> float | None:
    """The same analytic count for a timm ViT on an `hw` input -- patch embedding and every block over
    all tokens -- so its figures compare with our backbones' (None for other timm models)."""
    blocks = getattr(model, 'blocks', None)
    proj = getattr(getattr(model, 'patch_embed', None), 'proj', None)
    fc1 = getattr(getattr(blocks[0], 'mlp', None), 'fc1', None) if blocks else None
    if not isinstance(proj, nn.Conv2d) or not isinstance(fc1, nn.Linear) or not hasattr(model, 'embed_dim'):
        return None
    pad = getattr(model.patch_embed, 'dynamic_img_pad', False)  # pads a partial last patch, else drops it
    grid = [-(-size // stride) if pad else size // stride for size, stride in zip(hw, proj.stride)]
    tokens = grid[0] * grid[1] + int(getattr(model, 'num_prefix_tokens', 0))
    return total_flops(
        [conv_work('patch_embed', proj, grid), *dense_work(model.embed_dim, fc1.out_features, tokens, len(blocks))]
    )


def _backbone_model(spec: ModelSpec, module: nn.Module, origin: str) -> BenchModel:
    last: list[Any] = [None]  # the last forward's result, whose statistics give its FLOPs

    def run(images: Tensor) -> Any:
        last[0] = module(images)
        return last[0]

    return BenchModel(
        spec=spec,
        module=module,
        prepare=_identity,
        run=run,
        flops=lambda: backbone_flops(last[0]),
        timed=f'{origin}: `forward(images)`, i.e. all the maps it returns for its out_indices',
    )


def build_timm(spec: ModelSpec, hw: Sequence[int]) -> BenchModel:
    """A timm model, timed on the work that matches our backbones (see the module docstring)."""
    import timm

    from mmrecvit.models.arguments import stage_ends

    kwargs = dict(spec.kwargs)
    kwargs.setdefault('pretrained', False)
    kwargs.setdefault('num_classes', 0)
    created = ''
    try:
        if 'img_size' in kwargs:
            model = timm.create_model(spec.target, **kwargs)
        else:
            try:
                # pos_embed built for the benchmark size, as a timm user would create it (no resampling).
                model = timm.create_model(spec.target, img_size=tuple(hw), **kwargs)
                created = f'created with img_size={tuple(hw)}; '
            except TypeError:  # models without an img_size argument (convnets)
                model = timm.create_model(spec.target, **kwargs)
    except RuntimeError as e:  # timm: "Unknown model"
        raise SpecError(f'model spec {spec.text!r}: {e}') from e
    blocks = getattr(model, 'blocks', None)
    if hasattr(model, 'forward_intermediates') and blocks is not None and len(blocks) > 0:
        indices = sorted(set(stage_ends(len(blocks))))

        def run(x: Tensor) -> Any:
            return model.forward_intermediates(x, indices=indices, intermediates_only=True)

        timed = (
            f'timm `forward_intermediates(x, indices={indices}, intermediates_only=True)` ({created}patch '
            f'embedding, all {len(blocks)} blocks, {len(indices)} NCHW maps, no final norm/head: the work of '
            'our backbone forward)'
        )
    else:
        run = model.forward_features
        timed = f'timm `forward_features(x)` ({created}no head)'
    return BenchModel(
        spec=spec, module=model, prepare=_identity, run=run, flops=lambda: timm_vit_flops(model, hw), timed=timed
    )


def _strip_scope(type_name: Any) -> Any:
    # 'mmdet.PlainViT' -> 'PlainViT'
    return type_name.split('.')[-1] if isinstance(type_name, str) else type_name


def _registry_scope(cfg: Any, spec: ModelSpec) -> str:
    from ..mm.registry import config_scope  # here: `import mmrecvit.mm` registers into OpenMMLab, config models only

    scope = config_scope(cfg, f'model spec {spec.text!r}: building through a registry', SpecError)
    try:
        importlib.import_module(scope)
    except ImportError as e:
        raise SpecError(
            f'model spec {spec.text!r}: building this model needs {scope}, which does not import here ({e})'
        ) from e
    from mmengine.registry import init_default_scope

    import mmrecvit.mm  # noqa: F401  (registers our backbones and necks into the frameworks)

    init_default_scope(scope)
    return scope


def _build_whole(spec: ModelSpec, cfg: Any, kwargs: dict[str, Any], hw: Sequence[int], mode: str) -> BenchModel:
    """The whole detector/segmentor/classifier of `cfg` through its framework's registry."""
    scope = _registry_scope(cfg, spec)
    registry = importlib.import_module(f'{scope}.registry')
    module, name = DATA_SAMPLES[scope]
    sample_cls = getattr(importlib.import_module(module), name)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.update(kwargs)
    if cfg.get('data_preprocessor') is not None:  # a top-level one (mmpretrain's configs), as the Runner passes it
        model_cfg.setdefault('data_preprocessor', copy.deepcopy(cfg.data_preprocessor))
    forcing = _pop_forcing(spec, model_cfg.backbone)
    # No init_weights(): nothing is loaded, random weights time the same.
    model = registry.MODELS.build(model_cfg)
    _apply_forcing(spec, model.backbone, forcing)
    H, W = hw

    def prepare(images: Tensor) -> dict[str, Any]:
        # Images in 0..255 as a loader would give them; the model's own preprocessor normalises/pads.
        raw = (images * 40 + 128).clamp(0, 255).round().to(torch.uint8).cpu()
        meta = dict(img_shape=(H, W), ori_shape=(H, W), pad_shape=(H, W), scale_factor=(1.0, 1.0))
        data = dict(inputs=list(raw.unbind(0)), data_samples=[sample_cls(metainfo=meta) for _ in raw])
        return model.data_preprocessor(data, False)

    def run(data: dict[str, Any]) -> Any:
        return model(data['inputs'], data['data_samples'], mode=mode)

    return BenchModel(
        spec=spec,
        module=model,
        prepare=prepare,
        run=run,
        flops=lambda: None,
        timed=f"whole {scope} model `{type(model).__name__}(inputs, data_samples, mode='{mode}')` "
        '(data preprocessor untimed; FLOPs not counted)',
    )


def build_config(spec: ModelSpec, hw: Sequence[int], whole: bool = False, whole_mode: str = 'tensor') -> BenchModel:
    """The backbone (or with `whole`, the whole model) of an mmengine config file."""
    # Deferred to this path: backbone and timm specs must work where mmengine/mmdet/mmseg are not installed.
    from mmengine.config import Config

    path = Path(spec.target)
    if not path.is_file():
        raise SpecError(f'model spec {spec.text!r}: config file {spec.target!r} not found')
    cfg = Config.fromfile(str(path))
    kwargs = dict(spec.kwargs)
    whole = kwargs.pop('whole', whole)
    if 'model' not in cfg or 'backbone' not in cfg.model:
        raise SpecError(f'model spec {spec.text!r}: the config has no model.backbone')
    if whole:
        return _build_whole(spec, cfg, kwargs, hw, whole_mode)
    bb = dict(cfg.model.backbone.to_dict() if hasattr(cfg.model.backbone, 'to_dict') else cfg.model.backbone)
    bb.update(kwargs)
    name = _strip_scope(bb.pop('type', None))
    if name in _backbones():
        module = _build_our_backbone(spec, name, bb)
        return _backbone_model(spec, module, f'{name} from {path.name}')
    # A backbone of the frameworks (ResNet, Swin ...): through their registry.
    scope = _registry_scope(cfg, spec)
    registry = importlib.import_module(f'{scope}.registry')
    forcing = _pop_forcing(spec, bb)
    module = _apply_forcing(spec, registry.MODELS.build(dict(type=name, **bb)), forcing)
    return _backbone_model(spec, module, f'{scope} {name} from {path.name}')


def build_model(spec: ModelSpec, hw: Sequence[int], whole: bool = False, whole_mode: str = 'tensor') -> BenchModel:
    """Build one spec in eval mode (weights random: latency does not depend on them)."""
    if whole_mode not in WHOLE_MODES:
        raise ValueError(f'whole_mode must be one of {WHOLE_MODES}, got {whole_mode!r}')
    if spec.kind == 'backbone':
        bench = _backbone_model(spec, _build_our_backbone(spec, spec.target, spec.kwargs), spec.target)
    elif spec.kind == 'timm':
        bench = build_timm(spec, hw)
    elif spec.kind == 'config':
        bench = build_config(spec, hw, whole, whole_mode)
    else:
        raise SpecError(f'model spec {spec.text!r}: unknown kind {spec.kind!r}')
    bench.module.eval()
    return bench
