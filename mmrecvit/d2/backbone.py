"""Our backbones as detectron2 `Backbone`s, and the pyramid that takes their per-layer maps.

A backbone here returns one stride-16 map per `out_indices` layer (`ViTBackbone.forward`, through
`forward_intermediates`, STYLE 7), named `layer<i>` by its layer i. detectron2's `SimpleFeaturePyramid` builds
all of its levels from one map (`in_feature`, ViT's last); `LayerFeaturePyramid` is that module with level i
read from the i-th layer map instead, as the mm path's `SimplePyramid` does.
"""

from __future__ import annotations

import warnings
from typing import Any

from detectron2.layers import ShapeSpec
from detectron2.modeling import BACKBONE_REGISTRY, Backbone, SimpleFeaturePyramid
from torch import Tensor

from .. import models
from ..models import ViTBackbone
from ..models.checks import check_int, check_sequence


class RecViTBackbone(Backbone):
    """A detectron2 `Backbone` around one mmrecvit backbone (`net`), built from its own arguments.

    Subclasses (one per method, same name as the core class) set `core`. `net` holds exactly the
    parameters of the core model, under their own names, so an mmdet or mmpretrain checkpoint maps
    onto it strictly (`checkpoint.py`); `pretrained=PATH` (or `init_cfg`) is loaded here, strictly,
    through the core's checkpoint filter (timm/DeiT key maps, `pos_embed` resampling).

    Args:
        square_pad: as ViTDet's `SimpleFeaturePyramid`: pad every batch to this square size (0: off).
        out_feature: detectron2's ViT argument: the name of the last map (the last `out_indices` layer's; the others
            stay `layer<i>`), which a ViTDet config's `SimpleFeaturePyramid(in_feature='${.net.out_feature}')` reads.
            None: `layer<i>`.
        **kwargs: the core class's constructor arguments (`out_type` is always 'featmap').
    """

    core: type[ViTBackbone]

    def __init__(self, *, square_pad: int = 0, out_feature: str | None = None, **kwargs: Any) -> None:
        super().__init__()
        if kwargs.get('out_type', 'featmap') != 'featmap':
            raise ValueError(
                f"a detectron2 backbone returns feature maps: out_type must be 'featmap', got {kwargs['out_type']!r}"
            )
        self.net = self.core(**kwargs)
        if self.net.init_cfg is not None:
            self.net.init_weights()  # strict, through the core's filter (no detectron2 matching heuristics)
        self._square_pad = check_int('square_pad', square_pad, 0)
        self._out_features = [f'layer{i}' for i in self.net.out_indices]
        if out_feature is not None:
            if not isinstance(out_feature, str) or not out_feature:
                raise ValueError(f'out_feature must be the name of the last map (a str), got {out_feature!r}')
            self._out_features[-1] = out_feature
        if len(set(self._out_features)) != len(self._out_features):
            raise ValueError(f'out_indices name each layer once, got {self.net.out_indices}')

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        """(B, 3, H, W) -> {'layer<i>': (B, D, ceil(H/16), ceil(W/16))} in `out_indices` order: the backbone's
        `forward` (its `forward_intermediates`, with mmpretrain's final norm on the last layer's map)."""
        return dict(zip(self._out_features, self.net(x)))

    def output_shape(self) -> dict[str, ShapeSpec]:
        return {name: ShapeSpec(channels=self.net.embed_dim, stride=self.net.patch_size) for name in self._out_features}

    @property
    def size_divisibility(self) -> int:
        return self.net.patch_size

    @property
    def padding_constraints(self) -> dict[str, int]:
        return {'size_divisibility': self.net.patch_size, 'square_size': self._square_pad}


def _adapter(core: type[ViTBackbone]) -> type[RecViTBackbone]:
    doc = f'`mmrecvit.models.{core.__name__}` as a detectron2 Backbone (see `RecViTBackbone`).'
    cls = type(core.__name__, (RecViTBackbone,), {'core': core, '__doc__': doc, '__module__': __name__})
    BACKBONE_REGISTRY.register(cls)
    return cls


# Every backbone of `mmrecvit.models.BACKBONES`, also one registered later (`models.register_backbone`).
D2_BACKBONES: dict[str, type[RecViTBackbone]] = {}


def _add(name: str, core: type[ViTBackbone]) -> None:
    D2_BACKBONES[name] = globals()[name] = _adapter(core)  # `from mmrecvit.d2 import SRViT` in a LazyConfig


models.on_register(_add)
PlainViT, NaiveRecursiveViT, SRViT = D2_BACKBONES['PlainViT'], D2_BACKBONES['NaiveRecursiveViT'], D2_BACKBONES['SRViT']
ReViT, EdgeRecViT, MoRViT = D2_BACKBONES['ReViT'], D2_BACKBONES['EdgeRecViT'], D2_BACKBONES['MoRViT']


class LayerFeaturePyramid(SimpleFeaturePyramid):
    """detectron2's `SimpleFeaturePyramid` with level i built from the i-th layer map of `net`.

    Theirs applies every level's stage to the single map `in_feature`; ours get four layers' maps,
    one per level (the mm path's `SimplePyramid`), so only `forward` differs: the stages, norms,
    output names (p2..p6), strides and `square_pad` are theirs.

    Args:
        net: a `RecViTBackbone`.
        in_features: the layer maps for the levels, finest first (default: all of `net`'s, in order);
            one per scale factor.
        in_feature: `SimpleFeaturePyramid`'s (a ViTDet config's `'${.net.out_feature}'`): accepted when it names the
            last of `in_features`, the map theirs builds every level from (ours: the coarsest level's).
        **kwargs: `SimpleFeaturePyramid`'s (out_channels, scale_factors, top_block, norm, square_pad).
    """

    def __init__(
        self, net: Backbone, in_features: list[str] | None = None, in_feature: str | None = None, **kwargs: Any
    ) -> None:
        names = list(net.output_shape()) if in_features is None else list(check_sequence('in_features', in_features))
        if in_feature is not None and in_feature != names[-1]:
            raise ValueError(
                f'in_feature={in_feature!r} must name the last of in_features {names} (LayerFeaturePyramid reads one '
                "layer map per level: set in_features, or the net's out_feature)"
            )
        super().__init__(net, in_feature=names[-1], **kwargs)
        if len(names) != len(self.stages):
            raise ValueError(f'in_features needs one layer map per scale factor ({len(self.stages)}), got {names}')
        shapes = net.output_shape()
        unknown = [n for n in names if n not in shapes]
        if unknown or len({(shapes[n].channels, shapes[n].stride) for n in names}) != 1:
            raise ValueError(f'in_features must be maps of net of one shape ({sorted(shapes)}), got {names}')
        self.in_features = names

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        bottom_up = self.net(x)
        results = [stage(bottom_up[name]) for name, stage in zip(self.in_features, self.stages)]
        if self.top_block is not None:  # LastLevelMaxPool reads p5
            results.extend(self.top_block(results[self._out_features.index(self.top_block.in_feature)]))
        return dict(zip(self._out_features, results))


class StepFeaturePyramid(LayerFeaturePyramid):
    """Deprecated: `LayerFeaturePyramid` (the maps are named by layer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(
            'StepFeaturePyramid is deprecated; use LayerFeaturePyramid instead (the maps are named by layer: '
            "'layer<i>')",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(*args, **kwargs)
