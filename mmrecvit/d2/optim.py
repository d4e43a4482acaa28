"""Layer-wise learning-rate decay for detectron2 with our recursion-aware layer depths.

detectron2's ViTDet recipe passes `lr_factor_func=partial(get_vit_lr_decay_rate, ...)` to
`get_default_optimizer_params`: a layer id parsed from `blocks.<i>` in the parameter name. For a
recursive backbone the block index is not its depth (one block runs at several), so the factor here
comes from the backbone itself (`ViTBackbone.layer_depth`, the same table as the mm path's
`LayerDecayOptimWrapperConstructor`): rate ** (num_layers + 1 - layer_depth), 1 for the neck and heads, the rate read
under `layer_decay_policy` ('per_layer' as written, or 'matched': `mmrecvit.models.layer_decay`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from detectron2.solver import get_default_optimizer_params
from torch import nn

from ..adapters import layer_lr_scales
from ..models.checks import check_float


def layer_decay_lr_factor(model: nn.Module, rate: float, policy: str = 'per_layer') -> Callable[[str], float]:
    """A `lr_factor_func` for `get_default_optimizer_params(model, ...)`: full parameter name -> lr factor."""
    rate = check_float('layer_decay_rate', rate, 0.0, 1.0, low_open=True)
    factors = layer_lr_scales(model, rate, policy)

    def lr_factor(name: str) -> float:
        return factors.get(name, 1.0)

    return lr_factor


def optimizer_params(
    model: nn.Module,
    base_lr: float,
    layer_decay_rate: float = 1.0,
    layer_decay_policy: str = 'per_layer',
    **kwargs: Any,
) -> list[dict]:
    """`get_default_optimizer_params` with our layer decay: a LazyConfig optimizer's `params`
    (`tools/d2_train_net.py` sets `params.model` as detectron2's `lazyconfig_train_net.py` does)."""
    factor = layer_decay_lr_factor(model, layer_decay_rate, layer_decay_policy)
    return get_default_optimizer_params(model, base_lr=base_lr, lr_factor_func=factor, **kwargs)
