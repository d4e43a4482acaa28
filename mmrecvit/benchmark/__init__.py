"""The benchmark harness: side-by-side latency, throughput, memory and FLOP efficiency.

The one harness behind every performance figure in the README. `tools/analysis_tools/benchmark.py`
is its command line; this package holds the parts, so tests and other tools can reuse them. One
job per module, in the order a run uses them:

    specs.py    command-line model specs -> `ModelSpec` (literal kwargs only)
    build.py    `ModelSpec` -> `BenchModel` (our backbones, timm models, config models)
    forcing.py  the harness's fixed depth patterns (`forced_mean_depth`)
    memory.py   `PeakMemoryTracker`, peak tensor memory on the CPU
    timing.py   the measuring run (`run_benchmark`): interleaving, matmul probe, rows and ratios
    report.py   Markdown and CSV
    step.py     one whole training / test step measured (time, peak and saved memory, executed FLOPs)
    dry_run.py  a recipe's dry run, the core its frameworks share (`dry_run_mm.py`: mmdet / mmseg / mmpretrain;
                `dry_run_d2.py`: detectron2 LazyConfigs): one training and one test iteration at real sizes
    overhead.py the Python overhead of a forward (library calls, overhead-bound latency)
    imports.py  what an import costs, in fresh interpreters
    host_sync.py  `HostSyncCounter`: what would make the host wait for a CUDA stream, counted on any device
    gpu_check.py  the GPU check (scripts/gpu_check.sh): every check with a pass/fail threshold, a CPU dry mode;
                its checks in gpu_check_models.py, gpu_check_compile.py, gpu_check_runs.py, gpu_check_ops.py

Model specs (`specs.py`) name a backbone of ours `ClassName(kw=literal, ...)`, a timm model
`timm:name(...)` or a config `path/to/config.py(...)`; how each is built and timed: `build.py`.

Harness kwargs: a spec's kwargs (or a config's backbone) may carry `forced_mean_depth=M` and
`forced_depth_seed=S` (default 0). The harness takes them out before the model is built and runs
a token-adaptive backbone (EdgeRecViT) on a fixed, seeded depth pattern of per-image mean M
instead of its ranker's choice; the model's `depth_shift` / `max_depth` still apply, and
`forced_mean_depth=L` is the same model at full depth (`forcing.py`).
"""

from .build import WHOLE_MODES, BenchModel, backbone_flops, build_config, build_model, build_timm, timm_vit_flops
from .forcing import FORCING_KWARGS, force_mean_depth, forced_depths
from .machine import cpu_model, environment, physical_cores
from .memory import PeakMemoryTracker
from .report import CSV_FIELDS, csv_rows, format_markdown, write_csv
from .specs import ModelSpec, SpecError, parse_kwargs, parse_spec, parse_specs
from .timing import (
    DTYPES,
    STATISTICS,
    BenchConfig,
    BenchResult,
    MatmulProbe,
    Row,
    add_ratios,
    interleaved_order,
    peak_memory,
    percentile,
    run_benchmark,
    time_call,
)

__all__ = [
    'CSV_FIELDS',
    'DTYPES',
    'FORCING_KWARGS',
    'STATISTICS',
    'WHOLE_MODES',
    'BenchConfig',
    'BenchModel',
    'BenchResult',
    'MatmulProbe',
    'ModelSpec',
    'PeakMemoryTracker',
    'Row',
    'SpecError',
    'add_ratios',
    'backbone_flops',
    'build_config',
    'build_model',
    'build_timm',
    'cpu_model',
    'csv_rows',
    'environment',
    'force_mean_depth',
    'forced_depths',
    'format_markdown',
    'interleaved_order',
    'parse_kwargs',
    'parse_spec',
    'parse_specs',
    'peak_memory',
    'percentile',
    'physical_cores',
    'run_benchmark',
    'time_call',
    'timm_vit_flops',
    'write_csv',
]
