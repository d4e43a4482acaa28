"""The GPU check's compile and reViT step-dropout checks (`gpu_check.py`), on the models of `gpu_check_models.py`."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from ..adapters import TemperatureSchedule
from ..models import BACKBONES
from .gpu_check_models import QUICK, Case, amp, cases, images, input_size, model_case, train_loss
from .gpu_check_results import Result, Setup, at_most, guarded

ITERATIONS = 3  # compiled calls per mode: the first compiles, the others must not
BOUNDED = ('MoRViT-token_choice eval',)  # data-dependent token counts: a bounded number of graphs (docs/deployment.md)


# ---- compile ---------------------------------------------------------------------------------------------------------
def compiled(setup: Setup) -> Iterator[Result]:
    """torch.compile of each model (dynamo with a counting eager backend: the graphs are dynamo's whatever the backend
    lowers them with), `ITERATIONS` calls on new inputs of one shape: in training (forward, backward, an SGD step,
    Edge-RecViT's tau annealed as `TemperatureScheduleHook` does) and in eval. One graph at the first call (none: a
    graph break splits it), no recompile afterwards; the first call's seconds (dynamo's tracing, and one eager
    step) are reported, not judged. MoR-ViT token choice's eval cannot be one graph (its token counts are data,
    docs/deployment.md): at most N_r + 3 graphs, at most 2 recompiles, none past dynamo's recompile limit (an eager
    fallback fails the case); its training (the masked path, static shapes) is one graph as every method's."""
    for case in cases(setup, 'compile'):
        for mode in ('train', 'eval'):
            yield from guarded('compile', f'{case.name} {mode}', lambda c=case, m=mode: [compiled_case(c, setup, m)])


def compiled_case(case: Case, setup: Setup, mode: str) -> Result:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    graphs: list[Any] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
        graphs.append(gm)
        return gm.forward

    model = model_case(case, setup).train(mode == 'train')
    step = torch.compile(model, backend=backend)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    anneal = TemperatureSchedule(1.0, 0.1) if hasattr(model, 'gumbel_tau') else None
    batch, side = input_size(setup, 'compile')
    bounded = f'{case.name} {mode}' in BOUNDED  # token choice trains on static shapes (its masked path): one graph
    first, seconds = 0, 0.0
    limit = torch._dynamo.config.patch(fail_on_recompile_limit_hit=True)
    for i in range(ITERATIONS):
        start = time.perf_counter()
        x = images(batch, side, setup.device, seed=i)
        if mode == 'train':
            if anneal is not None:
                anneal.apply(model, i, ITERATIONS)
            with amp(setup), limit:
                loss = train_loss(step(x))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        else:
            with torch.no_grad(), amp(setup), limit:
                step(x)
        if setup.cuda:
            torch.cuda.synchronize()
        seconds = seconds or time.perf_counter() - start
        first = first or len(graphs)
    recompiles = len(graphs) - first
    breaks = [reason.splitlines()[0][:80] for reason in counters['unimplemented']]
    measured = f'graphs {first}, recompiles {recompiles}, first call {seconds:.1f} s'
    if bounded:
        most = model.num_recursions + 3
        passed = first <= most and recompiles <= 2
        return Result('compile', f'{case.name} {mode}', measured, f'graphs <= {most}, recompiles <= 2', passed)
    measured += f' (break: {breaks[0]})' if breaks else ''
    return Result('compile', f'{case.name} {mode}', measured, 'graphs 1, recompiles 0', first == 1 and recompiles == 0)


# ---- reViT's step dropout ----------------------------------------------------------------------------------------
BATCH = 64


def revit_dropout(setup: Setup) -> Iterator[Result]:
    """reViT at batch 64 (S at 224 with AMP on a GPU; Ti at 112 on the CPU, where issue 48 measured it): block calls
    per training forward with step dropout 0.3 (the steps, 12: one call per step whatever the batch), and the
    training step's time with step dropout over without (it does 30 % less work: at most 0.80)."""
    yield from guarded('revit_dropout', 'block calls', lambda: _revit_dropout(setup))


def _revit(setup: Setup, rate: float) -> tuple[nn.Module, int]:
    """reViT with step dropout `rate`, seeded, in train mode; and the side of its inputs."""
    if setup.quick:
        kwargs = dict(arch='tiny', **{k: v for k, v in QUICK.items() if k != 'window_size'})
    else:
        kwargs = dict(arch='small', img_size=224) if setup.cuda else dict(arch='tiny', img_size=112)
    torch.manual_seed(0)
    model = BACKBONES['ReViT'](**kwargs, num_experts=4, step_drop_rate=rate)
    return model.to(setup.device).train(), kwargs['img_size']


def _revit_dropout(setup: Setup) -> Iterator[Result]:
    (dropped, side), (full, _) = _revit(setup, 0.3), _revit(setup, 0.0)
    x = images(BATCH, side, setup.device)
    calls = []
    hook = dropped.block.register_forward_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        dropped(x)
    hook.remove()
    yield at_most('revit_dropout', f'block calls per forward, batch {BATCH}', len(calls), dropped.depth, fmt='d')

    def step(model: nn.Module) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            with amp(setup):
                loss = train_loss(model(x))
            loss.backward()
            if setup.cuda:
                torch.cuda.synchronize()
            return time.perf_counter() - start

        return run

    repeats = 3 if setup.quick else 5
    runs = {'dropped': step(dropped), 'full': step(full)}
    times: dict[str, list[float]] = {k: [] for k in runs}
    for i in range(repeats + 1):  # interleaved; the first round warms up
        for name in runs if i % 2 == 0 else reversed(runs):
            seconds = runs[name]()
            if i:
                times[name].append(seconds)
    ratio = statistics.median(times['dropped']) / statistics.median(times['full'])
    yield at_most('revit_dropout', f'step time 0.3 / 0, batch {BATCH}', ratio, 0.80, fmt='.2f', timing=True)
