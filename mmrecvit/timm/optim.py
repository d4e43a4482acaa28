"""Layer-wise learning-rate decay for timm's optimizer factory, with our recursion-aware layer depths.

timm's `param_groups_layer_decay` (what `create_optimizer_v2(model, layer_decay=...)` and train.py's
`--layer-decay` use) groups parameters by `model.group_matcher()`, ours one group per layer depth of
`models/layer_decay.py`, and gives the group of rank i the factor `decay ** (max rank - i)`. That is our rule
exactly when the depths are the consecutive integers 0..L+1 (PlainViT; any method whose blocks each run at one
layer); a recursive method's shared blocks sit at the mean of their layer positions (fractions, with gaps), which
the ranks compress: same order and groups, milder decay. `param_groups_layer_decay` here is timm's, with each
group's factor set to ours (the one the mm and detectron2 paths use):

    from functools import partial
    from timm.optim import create_optimizer_v2
    from mmrecvit.timm import param_groups_layer_decay
    optimizer = create_optimizer_v2(model, 'adamw', lr=1e-3, weight_decay=0.05,
                                    param_group_fn=partial(param_groups_layer_decay, layer_decay=0.75))
"""

from __future__ import annotations

from collections.abc import Collection

from torch import nn

from ..adapters import layer_lr_scales
from ..models.checks import check_float


def param_groups_layer_decay(
    model: nn.Module,
    weight_decay: float = 0.05,
    no_weight_decay_list: Collection[str] | None = None,
    layer_decay: float = 0.75,
    layer_decay_policy: str = 'per_layer',
) -> list[dict]:
    """timm's parameter groups (weight decay off for 1-D parameters and `no_weight_decay_list`, default
    `model.no_weight_decay()`) with `lr_scale` = `layer_decay ** (num_layers - layer depth)` of our backbones' rule
    (1 for parameters outside them), the rate read under `layer_decay_policy` ('per_layer' or 'matched':
    `mmrecvit.models.layer_decay`)."""
    layer_decay = check_float('layer_decay', layer_decay, 0.0, 1.0, low_open=True)
    if no_weight_decay_list is None:
        no_weight_decay_list = getattr(model, 'no_weight_decay', lambda: set())()
    # here, not at the top: timm.optim (its ~20 optimizers) would double what `import mmrecvit` adds to timm's import
    from timm.optim import param_groups_layer_decay as timm_param_groups_layer_decay

    groups = timm_param_groups_layer_decay(
        model, weight_decay=weight_decay, no_weight_decay_list=no_weight_decay_list, layer_decay=layer_decay
    )
    scales = layer_lr_scales(model, layer_decay, layer_decay_policy)
    by_param = {id(p): scales.get(name, 1.0) for name, p in model.named_parameters()}
    for group in groups:
        found = {by_param[id(p)] for p in group['params']}
        if len(found) != 1:
            raise ValueError(
                f'{type(model).__name__}.group_matcher() puts parameters of different layer depths in one group '
                f'(lr scales {sorted(found)}): it must group by the layer depth (RecViTClassifier.group_matcher)'
            )
        group['lr_scale'] = found.pop()
    return groups
