"""What the framework adapters (`mmrecvit.mm`, `mmrecvit.d2`, `mmrecvit.timm`) read from a model holding our backbones.

Plain PyTorch, so each adapter only hands the numbers to its framework: the auxiliary losses and
statistics of each backbone forward (to a loss dict and a log), each parameter's layer depth (to
layer-wise learning-rate decay), and a backbone temperature annealed over training (Edge-RecViT's
`gumbel_tau`: mmengine's `TemperatureScheduleHook`, detectron2's `RecViTRCNN(temperature_schedule=...)`).

A forward's statistics travel with its result (`models.stats.FeatureMaps.stats`): `StatsCollector` reads
them from each backbone's output with torch's own forward hooks (`register_forward_hook`), so nothing is
kept on the backbone and no method of a model is replaced. Named for its readers: the part the adapters
share, written once here instead of once per framework.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from .models import ForwardStats, ViTBackbone
from .models import layer_decay as decay
from .models.checks import check_choice, check_float, check_int
from .models.load_rules import adapt_to_model, refuse_wrong_shapes


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


def backbone_rates(model: nn.Module, rate: float, policy: str = 'per_layer') -> dict[int, float]:
    """id(parameter) -> the layer-decay rate of its backbone under `policy` (`layer_decay.POLICIES`), for every
    parameter of every outermost mmrecvit backbone of `model` (as `layer_depth_table` walks them)."""
    check_choice('layer_decay_policy', policy, decay.POLICIES)
    rates: dict[int, float] = {}
    owners: list[str] = []
    for prefix, backbone in model.named_modules():
        if not isinstance(backbone, ViTBackbone) or any(prefix.startswith(o + '.') for o in owners):
            continue
        owners.append(prefix)
        own = rate
        if policy == 'matched':
            positions = backbone.layer_positions()
            depths = [(decay.layer_depth(n, positions), p.numel()) for n, p in backbone.named_parameters()]
            with torch.device('meta'):  # only its size: a plain ViT's block at this width
                block_numel = sum(p.numel() for p in backbone.make_block().parameters())
            own = decay.matched_rate(rate, depths, decay.num_layers(positions), block_numel)
        rates.update({id(p): own for p in backbone.parameters()})
    return rates


def layer_lr_scales(model: nn.Module, rate: float, policy: str = 'per_layer') -> dict[str, float]:
    """Full parameter name -> learning-rate factor `rate ** (num_layers + 1 - layer depth)` for every parameter of every
    mmrecvit backbone of `model`, `rate` read under `policy` (`backbone_rates`; the rest, neck and heads, keep 1:
    absent here)."""
    rates = backbone_rates(model, rate, policy)
    params = dict(model.named_parameters())
    return {
        name: decay.lr_scale(rates[id(params[name])], depth, num_layers)
        for name, depth, num_layers in layer_depth_table(model).values()
    }


def adapt_checkpoint(
    model: nn.Module,
    state_dict: dict[str, Tensor],
    source: str = 'checkpoint',
    quiet: bool = False,
    refuse: bool = False,
) -> dict[str, Tensor]:
    """A whole-model state dict with the load rules (`models/load_rules.py`: pos_embed resampled, input channels
    adapted) applied to the keys of every mmrecvit backbone of `model`, for what compares shapes before
    `load_state_dict` (whose pre-hook applies the same rules) runs: mmengine's tools, detectron2's checkpointer.
    `refuse`: a backbone key of a wrong shape no rule covers is one `CheckpointError` (a loader that would drop it)."""
    sd = dict(state_dict)
    for name, module in model.named_modules():
        if isinstance(module, ViTBackbone):
            prefix = f'{name}.' if name else ''
            own = adapt_to_model(
                {k[len(prefix) :]: v for k, v in sd.items() if k.startswith(prefix)}, module, source, quiet
            )
            if refuse:
                refuse_wrong_shapes(own, module, source, prefix)
            sd.update({prefix + k: v for k, v in own.items()})
    return sd


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
