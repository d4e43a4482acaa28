"""What the framework adapters (`mmrecvit.mm`, `mmrecvit.d2`) read from a model holding our backbones.

Plain PyTorch, so each adapter only hands the numbers to its framework: the auxiliary losses and
statistics of the last forward (to a loss dict and a log), and each parameter's layer depth (to
layer-wise learning-rate decay).

Named for its readers: this is the part the adapters share, so it sits beside them at the package
level rather than in `mmrecvit.models`, which defines networks and reads nothing on a framework's
behalf (the backbones answer `stats` and `layer_depth`; how a model full of them is read is the
adapters' business, written once here instead of once per framework).
"""

from __future__ import annotations

from torch import Tensor, nn

from .models import ViTBackbone
from .models import layer_decay as decay


def backbone_terms(model: nn.Module) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """(aux losses with graph, detached scalars) of every mmrecvit backbone in `model` after its last
    forward; with several backbones each name gets a `bb<i>_` prefix."""
    losses: dict[str, Tensor] = {}
    scalars: dict[str, Tensor] = {}
    backbones = [m for m in model.modules() if isinstance(m, ViTBackbone)]
    for i, bb in enumerate(backbones):
        if bb.stats is None:
            continue
        prefix = '' if len(backbones) == 1 else f'bb{i}_'
        losses.update({prefix + k: v for k, v in bb.stats.aux_losses.items()})
        scalars.update({prefix + k: v.detach() for k, v in bb.stats.scalars.items()})
    return losses, scalars


def layer_depth_table(model: nn.Module) -> dict[int, tuple[str, float, int]]:
    """id(parameter) -> (full name, layer depth, num_layers) for every parameter of every mmrecvit backbone of
    `model` (the outermost one owns its parameters; `models.layer_decay` has the rule)."""
    table: dict[int, tuple[str, float, int]] = {}
    owners: list[str] = []
    for prefix, module in model.named_modules():
        if not isinstance(module, ViTBackbone) or any(prefix.startswith(o + '.') for o in owners):
            continue
        owners.append(prefix)
        positions = module.layer_positions()  # read once: it comes from the backbone's full plan
        num_layers = decay.num_layers(positions)
        for name, param in module.named_parameters():
            depth = float(decay.layer_depth(name, positions))
            if not 0 <= depth <= num_layers:
                raise ValueError(
                    f'{type(module).__name__}.layer_depth({name!r}) = {depth} is outside [0, num_layers={num_layers}]'
                )
            table[id(param)] = (f'{prefix}.{name}' if prefix else name, depth, num_layers)
    return table


def layer_lr_scales(model: nn.Module, rate: float) -> dict[str, float]:
    """Full parameter name -> learning-rate factor `rate ** (num_layers - layer depth)` for every parameter of every
    mmrecvit backbone of `model` (the rest, neck and heads, keep 1: absent here)."""
    return {
        name: decay.lr_scale(rate, depth, num_layers) for name, depth, num_layers in layer_depth_table(model).values()
    }
