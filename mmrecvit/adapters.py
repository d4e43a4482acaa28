"""What the framework adapters (`mmrecvit.mm`, `mmrecvit.d2`) read from a model holding our backbones.

Plain PyTorch, so each adapter only hands the numbers to its framework: the auxiliary losses and
statistics of the last forward (to a loss dict and a log), each parameter's layer depth (to
layer-wise learning-rate decay), and a backbone temperature annealed over training (Edge-RecViT's
`gumbel_tau`: mmengine's `TemperatureScheduleHook`, detectron2's `RecViTRCNN(temperature_schedule=...)`).

Named for its readers: this is the part the adapters share, so it sits beside them at the package
level rather than in `mmrecvit.models`, which defines networks and reads nothing on a framework's
behalf (the backbones answer `stats` and `layer_depth`; how a model full of them is read is the
adapters' business, written once here instead of once per framework).
"""

from __future__ import annotations

import math

from torch import Tensor, nn

from .models import ViTBackbone
from .models import layer_decay as decay
from .models.checks import check_choice, check_float, check_int


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


class TemperatureSchedule:
    """A backbone temperature (Edge-RecViT's `gumbel_tau`) as a function of the training iteration.

    tau goes from `start` to `end` over the iterations [`begin`, `stop`) (default: the whole run) and stays at `end`
    afterwards, `schedule` 'cosine', 'linear' or 'exp' (geometric). A function of the iteration, so a resumed run
    continues it exactly. `apply` sets it on every mmrecvit backbone of a model that has `attribute`.
    """

    SCHEDULES = ('cosine', 'linear', 'exp')

    def __init__(
        self,
        start: float = 1.0,
        end: float = 0.1,
        begin: int = 0,
        stop: int | None = None,
        schedule: str = 'cosine',
        attribute: str = 'gumbel_tau',
        owner: str = 'TemperatureSchedule',
    ) -> None:
        self.start = check_float(f'{owner} start', start, 0.0, math.inf, low_open=True)
        self.end = check_float(f'{owner} end', end, 0.0, math.inf, low_open=True)
        self.schedule = check_choice(f'{owner} schedule', schedule, self.SCHEDULES)
        self.begin = check_int(f'{owner} begin', begin, 0)
        self.stop = None if stop is None else check_int(f'{owner} stop', stop, begin + 1)
        self.attribute, self.owner = attribute, owner

    def value_at(self, iteration: int, max_iters: int) -> float:
        stop = self.stop if self.stop is not None else max_iters
        t = min(max((iteration - self.begin) / max(stop - self.begin, 1), 0.0), 1.0)
        if self.schedule == 'linear':
            return self.start + (self.end - self.start) * t
        if self.schedule == 'exp':
            return self.start * (self.end / self.start) ** t
        return self.end + (self.start - self.end) * 0.5 * (1 + math.cos(math.pi * t))

    def apply(self, model: nn.Module, iteration: int, max_iters: int) -> float:
        """Set the value at `iteration` on every backbone of `model` with the attribute; returns it."""
        targets = [m for m in model.modules() if isinstance(m, ViTBackbone) and hasattr(m, self.attribute)]
        if not targets:
            raise AttributeError(f'{self.owner}: no mmrecvit backbone of the model has {self.attribute!r}')
        value = self.value_at(iteration, max_iters)
        for m in targets:
            setattr(m, self.attribute, value)
        return value
