"""Measuring models side by side: latency, throughput, peak memory and the machine's matmul rate.

How a run measures (and why):

* **Models side by side, interleaved.** After a warm-up, every repeat runs each model once,
  round-robin, with the starting model rotated each repeat (`interleaved_order`). Load from other
  processes on a shared machine then hits all models alike instead of whichever ran last.
* **Latency** is the wall time of one forward (`time.perf_counter`; on CUDA bracketed by
  `torch.cuda.synchronize`), reported as median and spread (IQR, min-max); throughput, FLOP/s
  and ratios use the median (or, with `statistic='min'`, the fastest repeat: on a machine shared
  with other jobs the minimum estimates the undisturbed time better). Mode 'inference' (default)
  runs everything in `eval()` under `torch.inference_mode()`; mode 'train' times a training step
  instead (`training_step`: train mode with its noise, forward, backward, AdamW step). In fp32
  unless an autocast dtype is asked for, with a fixed thread count.
* **Peak memory** is measured in a separate, untimed forward: on CUDA from the allocator
  (`max_memory_allocated` minus what was allocated before), on the CPU with `PeakMemoryTracker`
  (tensor bookkeeping, which slows execution, hence the separate pass). Both count the tensors
  allocated during the forward, not the parameters or the input.
* **Analytic FLOPs** per image come from each model's `flops()` (`mmrecvit/models/flops.py`): the
  forward's, also in mode 'train' (a step's backward is about twice its forward for every model,
  so FLOP ratios between models stay the forward's).
* **Machine peak**: a square `torch.mm` (2048^3 on the CPU, 8192^3 on CUDA) in the same dtype. It
  runs best-of-5 at the start and end, and once in every interleaved round as one more "model", so
  it sees the same machine load as the models. Each model's achieved FLOP/s (analytic FLOPs at its
  median latency) is shown as a fraction of the matmul's median FLOP/s over the same rounds (min
  latency over the fastest matmul with `statistic='min'`): on a quiet machine that is the peak, on
  a shared one the load cancels to first order. The header prints the best and these values.
* **Ratios** against a reference model at the same batch: latency ratio (model/ref), speed-up
  (ref/model), ideal speed-up = FLOP ratio (ref FLOPs / model FLOPs), their quotient
  (speed-up / ideal; 1.0 means the FLOP saving became time saving) and memory ratio (model/ref).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .build import BenchModel
from .machine import environment, physical_cores
from .memory import PeakMemoryTracker

DTYPES = {'fp32': torch.float32, 'bf16': torch.bfloat16, 'fp16': torch.float16}
STATISTICS = ('median', 'min')  # what throughput, FLOP/s and ratios are computed from


def interleaved_order(num_models: int, repeats: int, rotate: bool = True) -> list[int]:
    """Model index of each timed forward: each repeat runs every model once, round-robin.

    With `rotate`, repeat r starts at model r mod n, so no model always runs right after the same
    other one (cache and frequency effects spread evenly).
    """
    order = []
    for r in range(repeats):
        shift = r % num_models if rotate else 0
        order.extend((shift + i) % num_models for i in range(num_models))
    return order


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    xs = sorted(values)
    if not xs:
        raise ValueError('percentile of no values')
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[Any], Any], inputs: Any, device: torch.device) -> float:
    """Seconds of one call, device work included."""
    _sync(device)
    t0 = time.perf_counter()
    fn(inputs)
    _sync(device)
    return time.perf_counter() - t0


def peak_memory(fn: Callable[[Any], Any], inputs: Any, device: torch.device) -> int:
    """Peak bytes of tensors allocated during one call (parameters and inputs not counted)."""
    if device.type == 'cuda':
        _sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn(inputs)
        _sync(device)
        return torch.cuda.max_memory_allocated(device) - base
    with PeakMemoryTracker() as tracker:
        fn(inputs)
    return tracker.peak_bytes


class MatmulProbe:
    """The machine's matmul throughput: each call runs one n x n x n `torch.mm` (2 n^3 FLOPs)."""

    def __init__(self, device: torch.device, dtype: torch.dtype = torch.float32, n: int = 2048) -> None:
        self.device, self.n = device, n
        self.flops = 2.0 * n**3
        self.a = torch.randn(n, n, device=device, dtype=dtype)
        self.b = torch.randn(n, n, device=device, dtype=dtype)
        self.out = torch.empty(n, n, device=device, dtype=dtype)

    def __call__(self, _: Any = None) -> None:
        torch.mm(self.a, self.b, out=self.out)

    def best(self, repeats: int = 5) -> float:
        """Best FLOP/s over `repeats` calls after one warm-up."""
        self()
        return self.flops / min(time_call(self, None, self.device) for _ in range(repeats))


@dataclass
class Row:
    """One model at one batch size: the measurements, then the ratios against the reference."""

    label: str
    batch: int
    samples_s: list[float]
    flops_per_image: float | None
    peak_bytes: int | None
    params: int
    matmul_flops: float | None = None  # matmul FLOP/s (same statistic) in the rounds that timed this row
    statistic: str = 'median'  # 'median' or 'min': the latency that throughput and ratios use
    latency_ratio: float | None = None
    speedup: float | None = None
    ideal_speedup: float | None = None
    quotient: float | None = None
    memory_ratio: float | None = None

    @property
    def median_s(self) -> float | None:
        return percentile(self.samples_s, 50) if self.samples_s else None

    @property
    def latency_s(self) -> float | None:
        """The latency throughput, FLOP/s and ratios use (`statistic` of the samples)."""
        if not self.samples_s:
            return None
        return min(self.samples_s) if self.statistic == 'min' else percentile(self.samples_s, 50)

    @property
    def iqr_s(self) -> float | None:
        return percentile(self.samples_s, 75) - percentile(self.samples_s, 25) if self.samples_s else None

    @property
    def images_per_s(self) -> float | None:
        lat = self.latency_s
        return self.batch / lat if lat else None

    @property
    def achieved_flops(self) -> float | None:
        """FLOP/s achieved at `latency_s`."""
        lat = self.latency_s
        return self.flops_per_image * self.batch / lat if lat and self.flops_per_image is not None else None

    @property
    def peak_fraction(self) -> float | None:
        """Achieved FLOP/s over the matmul's FLOP/s (same statistic) in the same rounds."""
        return _ratio(self.achieved_flops, self.matmul_flops)


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def add_ratios(rows: Iterable[Row], reference: str) -> None:
    """Fill each row's ratios against the reference model's row at the same batch size."""
    rows = list(rows)
    refs = {r.batch: r for r in rows if r.label == reference}
    for r in rows:
        ref = refs.get(r.batch)
        if ref is None:
            continue
        r.latency_ratio = _ratio(r.latency_s, ref.latency_s)
        r.speedup = _ratio(ref.latency_s, r.latency_s)
        r.ideal_speedup = _ratio(ref.flops_per_image, r.flops_per_image)
        r.quotient = _ratio(r.speedup, r.ideal_speedup)
        r.memory_ratio = _ratio(r.peak_bytes, ref.peak_bytes)


MODES = ('inference', 'train')


def _tensors(out: Any) -> list[Tensor]:
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    return [t for o in (out if isinstance(out, (list, tuple)) else []) for t in _tensors(o)]


def training_step(model: Any) -> Callable[[Any], None]:
    """A timed training step of a `BenchModel`: train mode (drop path, router noise, step dropout
    as in training), forward, a loss (mean square of the outputs plus a backbone's auxiliary
    losses), backward and an AdamW step."""
    module = model.module.train()
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-4)

    def step(inputs: Any) -> None:
        optimizer.zero_grad(set_to_none=True)
        out = model.run(inputs)
        loss = sum(t.float().square().mean() for t in _tensors(out))
        stats = getattr(out, 'stats', None)
        if stats is not None and stats.aux_losses:
            loss = loss + sum(stats.aux_losses.values())
        loss.backward()
        optimizer.step()

    return step


@dataclass
class BenchConfig:
    """How to run: see the command line's help for each field."""

    batches: Sequence[int] = (1,)
    hw: tuple[int, int] = (224, 224)
    device: str = 'cpu'
    threads: int | None = None
    dtype: str = 'fp32'
    warmup: int = 3
    repeats: int = 15
    memory: bool = True
    statistic: str = 'median'
    peak_size: int | None = None
    seed: int = 0
    progress: bool = True
    mode: str = 'inference'


@dataclass
class BenchResult:
    """Everything a report needs: environment, models, rows (ratios filled) and the machine peak."""

    env: dict[str, str]
    models: list[tuple[str, str, int]]  # (label, what is timed, parameters)
    rows: list[Row]
    reference: str
    peak_flops: float | None  # best matmul FLOP/s of the run
    config: BenchConfig
    command: str = ''


def describe_run(config: BenchConfig) -> dict[str, str]:
    """What a run times, in the report's words (`machine.environment` puts it beside the machine)."""
    return {
        'timed': (
            'one forward (eval, inference mode)'
            if config.mode == 'inference'
            else "one training step (train mode, forward + backward + AdamW step; GFLOPs are the forward's)"
        ),
        'dtype': config.dtype if config.dtype == 'fp32' else f'autocast {config.dtype} (fp32 weights)',
        'input': f'{config.hw[0]}x{config.hw[1]}, batch {", ".join(map(str, config.batches))}',
        'repeats': f'{config.warmup} warm-up + {config.repeats} interleaved per model and batch',
    }


@contextlib.contextmanager
def _num_threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc='benchmark', unit='fwd', disable=not enabled, leave=False, dynamic_ncols=True)


def run_benchmark(
    models: Sequence[BenchModel], config: BenchConfig, reference: str | None = None, checkout: str | Path | None = None
) -> BenchResult:
    """Measure `models` side by side (see the module docstring); returns rows with ratios filled.
    `checkout`: the repository whose commit the report names (`mmrecvit_version`)."""
    if not models:
        raise ValueError('no models to benchmark')
    labels = [m.label for m in models]
    reference = labels[0] if reference is None else reference
    if reference not in labels:
        raise ValueError(f'--reference {reference!r} is not one of the labels {labels}')
    if config.statistic not in STATISTICS:
        raise ValueError(f'statistic must be one of {STATISTICS}, got {config.statistic!r}')
    if config.dtype not in DTYPES:
        raise ValueError(f'dtype must be one of {list(DTYPES)}, got {config.dtype!r}')
    if config.repeats < 0 or config.warmup < 0:
        raise ValueError('repeats and warmup must be >= 0')
    if config.repeats == 0 and not config.memory:
        raise ValueError('nothing to measure: repeats is 0 and memory is off')
    if config.mode not in MODES:
        raise ValueError(f'mode must be one of {MODES}, got {config.mode!r}')
    device = torch.device(config.device)
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise ValueError('device cuda asked for, but torch sees no GPU')
    dtype = DTYPES[config.dtype]
    threads = config.threads or physical_cores()
    peak_n = config.peak_size or (8192 if device.type == 'cuda' else 2048)
    autocast = torch.autocast(device.type, dtype=dtype) if dtype != torch.float32 else contextlib.nullcontext()
    n = len(models)
    per_batch = n * (config.warmup + int(config.memory)) + (n + 1) * config.repeats
    rows: list[Row] = []
    with _num_threads(threads):
        env = environment(config.device, threads, describe_run(config), checkout)
        for m in models:
            m.module.to(device)
        runs = [m.run if config.mode == 'inference' else training_step(m) for m in models]
        gen = torch.Generator().manual_seed(config.seed)
        grad_mode = torch.inference_mode() if config.mode == 'inference' else contextlib.nullcontext()
        with grad_mode, _progress(per_batch * len(config.batches), config.progress) as bar:
            probe = MatmulProbe(device, dtype, peak_n)
            peak = probe.best()
            for batch in config.batches:
                images = torch.randn(batch, 3, *config.hw, generator=gen).to(device)
                inputs = [m.prepare(images) for m in models]
                samples: list[list[float]] = [[] for _ in range(n + 1)]  # the last one: the matmul
                peaks: list[int | None] = [None] * n
                with autocast:
                    for i, m in enumerate(models):
                        bar.set_postfix_str(f'warm-up {m.label} b{batch}')
                        for _ in range(config.warmup):
                            runs[i](inputs[i])
                            bar.update()
                    bar.set_postfix_str(f'timing b{batch}')
                    for i in interleaved_order(n + 1, config.repeats):
                        fn, x = (probe, None) if i == n else (runs[i], inputs[i])
                        samples[i].append(time_call(fn, x, device))
                        bar.update()
                    if config.memory:
                        for i, m in enumerate(models):
                            bar.set_postfix_str(f'memory {m.label} b{batch}')
                            peaks[i] = peak_memory(runs[i], inputs[i], device)
                            bar.update()
                mm = samples[n]
                matmul = probe.flops / (min(mm) if config.statistic == 'min' else percentile(mm, 50)) if mm else None
                if samples[n]:
                    peak = max(peak, probe.flops / min(samples[n]))
                for i, m in enumerate(models):
                    rows.append(
                        Row(
                            label=m.label,
                            batch=batch,
                            samples_s=samples[i],
                            flops_per_image=m.flops(),
                            peak_bytes=peaks[i],
                            params=m.num_params,
                            matmul_flops=matmul,
                            statistic=config.statistic,
                        )
                    )
            peak = max(peak, probe.best())
    if hasattr(os, 'getloadavg'):  # other processes' load is the main source of noise on a shared machine
        env['load average at end'] = ', '.join(f'{v:.2f}' for v in os.getloadavg())
    add_ratios(rows, reference)
    return BenchResult(
        env=env,
        models=[(m.label, m.timed, m.num_params) for m in models],
        rows=rows,
        reference=reference,
        peak_flops=peak,
        config=config,
    )
