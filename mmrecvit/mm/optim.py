"""Layer-wise learning-rate decay that understands recursion, as an mmengine optimizer-wrapper constructor.

The rule lives with the model (STYLE 12): every backbone answers `layer_depth(name)` and
`num_layers` (L, as detectron2 and mmpretrain count layers; `mmrecvit.models.backbone.ViTBackbone`: embeddings
0, a block used at several depths the mean of its layer positions, fresh routers/rankers/step transforms and
final norms `num_layers + 1`).
This constructor only asks: no parameter names or class names are matched here.

Config (mmdet or mmseg; `paramwise_cfg` keeps all of mmengine's options, e.g. `custom_keys`):

    optim_wrapper = dict(
        type='OptimWrapper',
        constructor='LayerDecayOptimWrapperConstructor',
        optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05),
        paramwise_cfg=dict(layer_decay_rate=0.75, layer_decay_policy='matched',
                           custom_keys={'norm': dict(decay_mult=0.0)}))

`layer_decay_policy` says what the rate means across methods (`mmrecvit.models.layer_decay`): 'per_layer' (the
default) applies it as written; 'matched' gives each backbone the rate at which its embeddings and blocks get a
plain ViT's mean lr scale at the written rate (the recipes' policy: docs/comparison.md).
"""

from __future__ import annotations

import logging
from collections import defaultdict

from mmengine.logging import print_log
from mmengine.optim import DefaultOptimWrapperConstructor
from torch import nn

from ..adapters import backbone_rates, layer_depth_table
from ..models import layer_decay as decay
from ..models.checks import check_choice
from ..models.layer_decay import lr_scale


class LayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """`DefaultOptimWrapperConstructor` plus layer-wise learning-rate decay for our backbones.

    Each parameter group is built by mmengine's rules first (`custom_keys` with `lr_mult` /
    `decay_mult`, `norm_decay_mult`, `bias_lr_mult`, ...); then the learning rate of a backbone
    parameter is multiplied by `layer_decay_rate ** (num_layers + 1 - layer_depth(name))`, asked from
    the backbone. Parameters of modules without `layer_depth` (neck, heads) keep scale 1.
    Each group records its factor as `lr_scale`.

    Args (in `paramwise_cfg`):
        layer_decay_rate: in (0, 1]; 1 switches the decay off. Required.
        layer_decay_policy: 'per_layer' (default) or 'matched' (module docstring).
        everything else: as `DefaultOptimWrapperConstructor`.
    """

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: dict | None = None) -> None:
        paramwise_cfg = dict(paramwise_cfg or {})
        rate = paramwise_cfg.get('layer_decay_rate')
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1:
            raise ValueError(
                'LayerDecayOptimWrapperConstructor needs paramwise_cfg.layer_decay_rate, a number in '
                f'(0, 1] (1: no decay), got {rate!r}'
            )
        policy = paramwise_cfg.get('layer_decay_policy', 'per_layer')
        check_choice('layer_decay_policy', policy, decay.POLICIES)
        super().__init__(optim_wrapper_cfg, paramwise_cfg)
        if self.base_lr is None:
            raise ValueError('layer-wise lr decay scales the optimizer lr: set optimizer.lr')
        self.layer_decay_rate, self.layer_decay_policy = float(rate), policy

    def add_params(self, params: list[dict], module: nn.Module, prefix: str = '', is_dcn_module=None) -> None:
        """mmengine's parameter groups, then each backbone group's lr scaled by its layer depth."""
        if prefix:  # mmengine's recursion into submodules: its rules only
            super().add_params(params, module, prefix, is_dcn_module)
            return
        start = len(params)
        super().add_params(params, module, prefix, is_dcn_module)
        depths = layer_depth_table(module)
        rates = backbone_rates(module, self.layer_decay_rate, self.layer_decay_policy)
        summary: dict[tuple[float, float], int] = defaultdict(int)
        for group in params[start:]:
            scale = 1.0
            for param in group['params']:
                if id(param) in depths:
                    _, depth, num_layers = depths[id(param)]
                    scale = lr_scale(rates[id(param)], depth, num_layers)
                    summary[(depth, scale)] += param.numel()
            group['lr'] = group.get('lr', self.base_lr) * scale
            group['lr_scale'] = scale
        if summary:
            (low, first), (high, last) = min(summary), max(summary)
            used = ', '.join(f'{r:.4g}' for r in sorted(set(rates.values())))
            print_log(
                f'layer-wise lr decay {self.layer_decay_rate} ({self.layer_decay_policy}: rate {used}): '
                f'backbone lr x{first:.4g} (depth {low:g}) to x{last:.4g} '
                f"(depth {high:g}) over {len(summary)} depths, other parameters x1 (each depth at log_level='DEBUG')",
                logger='current',
                level=logging.INFO,
            )
            rows = ', '.join(f'depth {d:g}: x{s:.4g} ({n / 1e6:.2f}M)' for (d, s), n in sorted(summary.items()))
            print_log(f'layer-wise lr decay by depth: {rows}', logger='current', level=logging.DEBUG)
        else:
            print_log(
                'LayerDecayOptimWrapperConstructor: no module of the model answers layer_depth(); every lr scale is 1',
                logger='current',
                level=logging.WARNING,
            )


OPTIM_WRAPPER_CONSTRUCTORS = {'LayerDecayOptimWrapperConstructor': LayerDecayOptimWrapperConstructor}
