"""The Python overhead of a forward: library calls counted exactly, and latency where the matmuls are negligible.

On a GPU a small forward (batch 1, few tokens) is bound by what the host does between kernel launches, the
Python of the library above all; on a CPU the matmuls of a 224² forward hide it. Two measures of it:

* **Library calls** (deterministic): the Python function calls (`sys.setprofile` 'call' events, a generator's
  resumptions included) whose code is in the model's library, mmrecvit's or timm's package folders, during one eval
  forward; torch's own functions are not counted (the same for every model). Per forward and per block application
  (the applications the forward's statistics list; timm's ViT: its blocks), on a repeated input (every cache warm)
  and on new inputs (the most over a few images never seen: what routers decide anew costs there).
* **Library frames to attention**: the frames of that code on the stack at each attention call
  (`F.scaled_dot_product_attention`), the fewest and the most in one forward: how deep a reader follows the
  forward down to attention (timm's ViT: `forward_intermediates`, `Block.forward`, `Attention.forward`).
* **Overhead-bound latency** (a GPU-launch proxy): the median latency at 32x32, batch 1 (4 patch tokens and
  CLS: almost no arithmetic), interleaved with timm's ViT, also per block application. Noisy on a shared machine.

What each model runs: ours `model(x)` (the maps of its `out_indices`), timm's ViT `forward_intermediates(x,
indices=<the 4 stage ends>, intermediates_only=True)`: the same work. `tools/analysis_tools/overhead.py` is the
command line; `scripts/benchmarks.sh overhead` writes benchmarks/python_overhead.md.
"""

from __future__ import annotations

import importlib
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .timing import interleaved_order

LIBRARIES = ('mmrecvit', 'timm')  # the packages whose calls count


def library_roots(names: Sequence[str] = LIBRARIES) -> tuple[str, ...]:
    """The package folders of `names` (imported here: timm is not a module-level dependency of the harness)."""
    return tuple(os.path.dirname(os.path.abspath(importlib.import_module(n).__file__)) + os.sep for n in names)


def frames_to_attention(fn: Callable[[], Any], roots: Sequence[str] | None = None) -> tuple[int, int] | None:
    """(fewest, most) frames of code under `roots` (default `library_roots()`) on the stack at the attention calls
    (`torch.nn.functional.scaled_dot_product_attention`) of one `fn()`, the harness's own (this package) left out;
    None without attention."""
    roots, seen = tuple(library_roots() if roots is None else roots), []
    harness, sdpa = os.path.dirname(os.path.abspath(__file__)) + os.sep, F.scaled_dot_product_attention

    def probe(*args: Any, **kwargs: Any) -> Tensor:
        frame, n = sys._getframe(1), 0
        while frame is not None:
            name = frame.f_code.co_filename
            n += name.startswith(roots) and not name.startswith(harness)
            frame = frame.f_back
        seen.append(n)
        return sdpa(*args, **kwargs)

    F.scaled_dot_product_attention = probe  # the libraries call it through the module: `F.scaled_dot_product_...`
    try:
        fn()
    finally:
        F.scaled_dot_product_attention = sdpa
    return (min(seen), max(seen)) if seen else None


def count_calls(fn: Callable[[], Any], roots: Sequence[str] | None = None) -> Counter:
    """(file name, function) -> Python calls made in one `fn()` by code under `roots` (default `library_roots()`)."""
    roots = tuple(library_roots() if roots is None else roots)
    calls: Counter = Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == 'call' and frame.f_code.co_filename.startswith(roots):
            calls[(os.path.basename(frame.f_code.co_filename), frame.f_code.co_name)] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


@dataclass
class OverheadRow:
    """One model's library calls (a repeated input; `calls_new`: the most on new inputs), library frames down to
    attention and overhead-bound latency (per forward and per block application)."""

    label: str
    applications: int
    calls: int
    calls_new: int | None = None
    frames: tuple[int, int] | None = None
    latency_ms: float | None = None

    @property
    def calls_per_application(self) -> float:
        return self.calls / self.applications

    @property
    def ms_per_application(self) -> float | None:
        return None if self.latency_ms is None else self.latency_ms / self.applications


def timm_forward(model: nn.Module) -> Callable[[Tensor], Any]:
    """timm's ViT doing our backbones' work: the maps of the 4 stage ends."""
    n = len(model.blocks)
    indices = [n * (i + 1) // 4 - 1 for i in range(4)]
    return lambda x: model.forward_intermediates(x, indices=indices, intermediates_only=True)


def applications(model: nn.Module, x: Tensor) -> int:
    """Block applications one forward of `model` runs: ours from its statistics, timm's ViT its blocks."""
    if hasattr(model, 'forward_intermediates') and hasattr(model, 'out_indices'):  # ours
        return sum(1 for w in model(x).stats.blocks if w.queries > 0)
    return len(model.blocks)


def measure(
    models: dict[str, tuple[nn.Module, Callable[[Tensor], Any]]],
    size: int = 32,
    repeats: int = 50,
    warmup: int = 5,
    new_inputs: int = 4,
) -> list[OverheadRow]:
    """Every model in eval mode under inference_mode on one (1, 3, size, size) image: its calls (a repeated input,
    every cache warm, and the most over `new_inputs` images it has not seen), its library frames down to attention
    and, with `repeats` > 0, its median latency over interleaved repeats."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 3, size, size, generator=gen)
    fresh = [torch.randn(1, 3, size, size, generator=gen) for _ in range(new_inputs)]
    rows, runs = [], []
    with torch.inference_mode():
        for label, (model, run) in models.items():
            model.eval()
            for _ in range(max(warmup, 1)):
                run(x)
            calls = sum(count_calls(lambda r=run: r(x)).values())
            new = max((sum(count_calls(lambda r=run, y=y: r(y)).values()) for y in fresh), default=None)
            frames = frames_to_attention(lambda r=run: r(x))
            rows.append(OverheadRow(label, applications(model, x), calls, new, frames))
            runs.append(run)
        if repeats > 0:
            times: list[list[float]] = [[] for _ in runs]
            for i in interleaved_order(len(runs), repeats):
                t0 = time.perf_counter()
                runs[i](x)
                times[i].append(time.perf_counter() - t0)
            for row, t in zip(rows, times):
                row.latency_ms = 1e3 * statistics.median(t)
    return rows


def format_table(rows: list[OverheadRow], reference: str, per_application_reference: str) -> str:
    """Markdown: frames to attention, calls (repeated and new inputs) and latency per forward (ratio to `reference`)
    and per application (ratio to `per_application_reference`)."""
    by_label = {r.label: r for r in rows}
    ref, app = by_label[reference], by_label[per_application_reference]
    lines = [
        f'| model | block applications | library frames to attention | library calls | calls on new inputs | '
        f'calls / {reference} | calls per application | per application / {per_application_reference} | '
        f'latency (ms) | latency / {reference} | latency per application / {per_application_reference} |',
        '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ]

    def ratio(a: float | None, b: float | None) -> str:
        return '–' if a is None or b is None else f'{a / b:.3f}'

    for r in rows:
        latency = '–' if r.latency_ms is None else f'{r.latency_ms:.2f}'
        frames = (
            '–' if r.frames is None else f'{r.frames[0]}' + (f'-{r.frames[1]}' if r.frames[1] > r.frames[0] else '')
        )
        new = '–' if r.calls_new is None else str(r.calls_new)
        lines.append(
            f'| {r.label} | {r.applications} | {frames} | {r.calls} | {new} | {ratio(r.calls, ref.calls)} | '
            f'{r.calls_per_application:.2f} | {ratio(r.calls_per_application, app.calls_per_application)} | '
            f'{latency} | {ratio(r.latency_ms, ref.latency_ms)} | '
            f'{ratio(r.ms_per_application, app.ms_per_application)} |'
        )
    return '\n'.join(lines)
