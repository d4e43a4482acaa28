"""What the framework adapters (`mmrecvit.mm`, `mmrecvit.d2`, `mmrecvit.timm`) read from a model holding our backbones.

Plain PyTorch, so each adapter only hands the numbers to its framework: the auxiliary losses and
statistics of each backbone forward (to a loss dict and a log), and each parameter's layer depth (to
layer-wise learning-rate decay).

A forward's statistics travel with its result (`models.stats.FeatureMaps.stats`): `StatsCollector` reads
them from each backbone's output with torch's own forward hooks (`register_forward_hook`), so nothing is
kept on the backbone and no method of a model is replaced. Named for its readers: the part the adapters
share, written once here instead of once per framework.
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from .models import ForwardStats, ViTBackbone
from .models import layer_decay as decay


class StatsCollector:
    """The `ForwardStats` of every forward of every mmrecvit backbone of `model` while it is open (a context
    manager; `remove()` closes it): torch forward hooks read each backbone output's `.stats`.

    `terms()` hands over what was collected since the last call, as (aux losses with graph, detached scalars);
    with several backbones each name gets a `bb<i>_` prefix (i: the backbone's order in `model.modules()`), and
    a backbone that ran several times contributes the sum of its aux losses and its last forward's scalars.
    """

    def __init__(self, model: nn.Module) -> None:
        self.backbones = [m for m in model.modules() if isinstance(m, ViTBackbone)]
        self._collected: list[tuple[int, ForwardStats]] = []
        self._handles: list[RemovableHandle] = [
            bb.register_forward_hook(lambda module, args, out, i=i: self._record(i, out))
            for i, bb in enumerate(self.backbones)
        ]

    def _record(self, index: int, output: object) -> None:
        stats = getattr(output, 'stats', None)  # a plain tuple while tracing: nothing to collect
        if stats is not None:
            self._collected.append((index, stats))

    def clear(self) -> None:
        self._collected = []

    def terms(self) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        collected, self._collected = self._collected, []
        losses: dict[str, Tensor] = {}
        scalars: dict[str, Tensor] = {}
        for i, stats in collected:
            prefix = '' if len(self.backbones) == 1 else f'bb{i}_'
            for k, v in stats.aux_losses.items():
                losses[prefix + k] = losses[prefix + k] + v if prefix + k in losses else v
            scalars.update({prefix + k: v.detach() for k, v in stats.scalars.items()})
        return losses, scalars

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles, self._collected = [], []

    def __enter__(self) -> StatsCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


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
            if not 0 <= depth <= num_layers + 1:
                raise ValueError(
                    f'{type(module).__name__}.layer_depth({name!r}) = {depth} is outside [0, num_layers + 1 = '
                    f'{num_layers + 1}]'
                )
            table[id(param)] = (f'{prefix}.{name}' if prefix else name, depth, num_layers)
    return table


def layer_lr_scales(model: nn.Module, rate: float) -> dict[str, float]:
    """Full parameter name -> learning-rate factor `rate ** (num_layers - layer depth)` for every parameter of every
    mmrecvit backbone of `model` (the rest, neck and heads, keep 1: absent here)."""
    return {
        name: decay.lr_scale(rate, depth, num_layers) for name, depth, num_layers in layer_depth_table(model).values()
    }
