"""Measuring one iteration of a whole training or test step: wall time, peak memory, saved activations, FLOPs.

Used by the dry runs of a recipe (`dry_run.py`, the core both share, and `dry_run_mm.py`, `dry_run_d2.py`), where
one call is a framework's own training / test step on a prepared batch.

* **Time**: `repeats` calls timed with `time.perf_counter` (CUDA synchronised), nothing instrumented.
* **Memory and FLOPs**: one more call, instrumented. Memory counts the tensors allocated *during* the call
  (what existed before, e.g. parameters and, after a first step, the optimizer's state, is not counted):
  on CUDA from the allocator (`max_memory_allocated`), on the CPU with `PeakMemoryTracker`. `saved_bytes`
  is what was live when the backward began (`probe`: the method the framework calls right before it), i.e.
  the activations autograd keeps for the backward plus the batch; with activation checkpointing only the
  block inputs. FLOPs come from torch's `FlopCounterMode`: every matmul, convolution and attention product
  the call executed, forward and backward (and a checkpointed forward's recomputation), as 2 x MACs, the
  convention of `mmrecvit/models/flops.py`; norms and elementwise ops are not counted.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from .memory import PeakMemoryTracker


def _cpu_sdpa(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query, key, value)


def _cpu_sdpa_backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out, query, key, value)


# torch counts the CUDA attention kernels but not the CPU one that `scaled_dot_product_attention` runs here
_aten = torch.ops.aten
CPU_ATTENTION_FLOPS = {
    _aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_backward,
}


@dataclass
class StepMeasurement:
    """One kind of iteration (train or test), measured."""

    seconds: list[float] = field(default_factory=list)  # one per timed call
    peak_bytes: int = 0  # peak of the tensors allocated during the instrumented call
    saved_bytes: int | None = None  # live when the backward began (None: no backward / no probe)
    flops: float = 0.0  # executed by the instrumented call (2 x MACs)
    module_flops: dict[str, float] = field(default_factory=dict)  # per module name (torch's FlopCounterMode)

    def module(self, name: str) -> float | None:
        """FLOPs counted in the submodule `name` of the model (e.g. 'backbone', 'backbone.net.net'), forward and
        backward."""
        depth = name.count('.') + 1  # torch names them '<model class>.<name>'
        hits = [v for k, v in self.module_flops.items() if k.count('.') == depth and k.endswith(f'.{name}')]
        return hits[0] if len(hits) == 1 else None

    @property
    def median_seconds(self) -> float | None:
        xs = sorted(self.seconds)
        if not xs:
            return None
        mid = len(xs) // 2
        return xs[mid] if len(xs) % 2 else 0.5 * (xs[mid - 1] + xs[mid])


class _Memory:
    """The bytes allocated since `__enter__` (peak and current), on CUDA or by tensor bookkeeping."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == 'cuda'
        self.device = device
        self.tracker = None if self.cuda else PeakMemoryTracker()

    def __enter__(self) -> _Memory:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        else:
            self.tracker.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device) - self.base
        else:
            self.tracker.__exit__(*exc)
            self.peak = self.tracker.peak_bytes

    def current(self) -> int:
        if self.cuda:
            return torch.cuda.memory_allocated(self.device) - self.base
        return self.tracker.current_bytes


@contextlib.contextmanager
def _probe(obj: Any, name: str | None, record: Callable[[], None]) -> Iterator[None]:
    """Call `record()` each time `obj.<name>(...)` is called, for the duration (instance attribute only)."""
    if obj is None or name is None:
        yield
        return
    original = getattr(obj, name)
    own = name in vars(obj)  # an instance attribute already (put back), else the class's method

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        record()
        return original(*args, **kwargs)

    setattr(obj, name, wrapped)
    try:
        yield
    finally:
        if own:
            setattr(obj, name, original)
        else:
            delattr(obj, name)


def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def measure_step(
    step: Callable[[], Any],
    device: torch.device | str,
    repeats: int = 1,
    probe: tuple[Any, str] | None = None,
    instrument: bool = True,
    progress: Callable[[str], None] | None = None,
) -> StepMeasurement:
    """Time `step()` `repeats` times, then run it once instrumented (memory, saved activations, FLOPs).

    `probe` = (object, method name) called right before the backward (the saved-activation reading).
    `progress(what)` is told before each call (a progress bar's description).
    """
    device = torch.device(device)
    out = StepMeasurement()
    for r in range(repeats):
        if progress:
            progress(f'timed {r + 1}/{repeats}')
        _sync(device)
        start = time.perf_counter()
        step()
        _sync(device)
        out.seconds.append(time.perf_counter() - start)
    if not instrument:
        return out
    if progress:
        progress('memory + FLOPs')
    readings: list[int] = []
    flop_counter = FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION_FLOPS)
    with _Memory(device) as memory:
        with _probe(*(probe or (None, None)), lambda: readings.append(memory.current())), flop_counter:
            step()
    out.peak_bytes = int(memory.peak)
    out.saved_bytes = int(readings[0]) if readings else None
    out.flops = float(flop_counter.get_total_flops())
    out.module_flops = {name: float(sum(ops.values())) for name, ops in flop_counter.get_flop_counts().items()}
    return out
