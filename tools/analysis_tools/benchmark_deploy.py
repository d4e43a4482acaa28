"""CPU latency of deployed backbones side by side: onnxruntime vs PyTorch eager, and torch.compile vs eager.

    python tools/analysis_tools/benchmark_deploy.py                      # the docs table: S models at 512x512
    python tools/analysis_tools/benchmark_deploy.py --shape 64 64 --repeats 3 --models plainvit-s

Each model (batch 1, fp32, eval, `torch.inference_mode`) runs in three runtimes: PyTorch eager,
`torch.compile` (default mode) and onnxruntime (CPUExecutionProvider, the ONNX file exported at
`--shape` by `mmrecvit.deploy.export_onnx`, static, checked against eager before timing: max |diff|
column). All runtimes use the same thread count (`--threads`, default the physical cores); after
`--warmup` untimed calls, the timed calls of all (model, runtime) pairs are interleaved round-robin
(`mmrecvit.benchmark.timing.interleaved_order`) and the median is reported, with the ratios
eager / compile and eager / onnxruntime (> 1: faster than eager). reViT is timed folded to dense
(`fold_to_plainvit`), what a deployment runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from mmrecvit import deploy
from mmrecvit.benchmark.machine import physical_cores
from mmrecvit.benchmark.timing import interleaved_order, percentile, time_call
from mmrecvit.inputs import tool_parser
from mmrecvit.models import BACKBONES
from mmrecvit.models.revit_fold import fold_to_plainvit

MODELS = {  # label -> (class, kwargs); reViT is folded after building
    'plainvit-s': ('PlainViT', dict(arch='small')),
    'srvit-s-T4': ('SRViT', dict(arch='small', num_recursions=4)),
    'revit-s-folded': ('ReViT', dict(arch='small', num_experts=4)),
    'morvit-s': ('MoRViT', dict(arch='small')),
}
RUNTIMES = ('eager', 'compile', 'onnxruntime')


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser('tools/analysis_tools/benchmark_deploy.py', __doc__)
    parser.add_argument('--models', nargs='+', choices=list(MODELS), default=list(MODELS), help='models to time')
    parser.add_argument(
        '--shape',
        type=int,
        nargs=2,
        default=(512, 512),
        metavar=('H', 'W'),
        help='input size, multiples of 16 (default 512 512)',
    )
    parser.add_argument('--repeats', type=int, default=10, help='timed calls per (model, runtime) (default 10)')
    parser.add_argument('--warmup', type=int, default=2, help='untimed calls first (default 2)')
    parser.add_argument('--threads', type=int, default=None, help='CPU threads (default: physical cores)')
    parser.add_argument('--out', default=None, help='also write the Markdown table here')
    return parser


def build(label: str) -> torch.nn.Module:
    name, kwargs = MODELS[label]
    torch.manual_seed(0)
    model = BACKBONES[name](**kwargs).eval()
    return fold_to_plainvit(model) if name == 'ReViT' else model


def runtimes(model: torch.nn.Module, x: torch.Tensor, onnx_path: Path, threads: int) -> tuple[dict, float]:
    """The three callables of one model (input -> outputs) and the max |onnxruntime - eager| at `x`."""
    import onnxruntime as ort

    deploy.export_onnx(model, x, onnx_path, stride=16)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    # Idle onnxruntime workers spin by default: interleaved with torch they would steal its cores.
    options.add_session_config_entry('session.intra_op.allow_spinning', '0')
    session = ort.InferenceSession(str(onnx_path), options, providers=['CPUExecutionProvider'])
    name = session.get_inputs()[0].name
    compiled = torch.compile(model)

    def eager(inp):
        with torch.inference_mode():
            return model(inp)

    def compiled_call(inp):
        with torch.inference_mode():
            return compiled(inp)

    def onnx_call(inp):
        return session.run(None, {name: inp.numpy()})

    diff = max(float(np.abs(a.numpy() - b).max()) for a, b in zip(eager(x), onnx_call(x)))
    return {'eager': eager, 'compile': compiled_call, 'onnxruntime': onnx_call}, diff


def measure(args: argparse.Namespace) -> list[dict]:
    threads = args.threads or physical_cores()
    torch.set_num_threads(threads)
    x = torch.randn(1, 3, *args.shape, generator=torch.Generator().manual_seed(0))
    calls: list[tuple[str, str, Callable]] = []
    diffs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label in args.models:
            fns, diffs[label] = runtimes(build(label), x, Path(tmp) / f'{label}.onnx', threads)
            calls += [(label, rt, fns[rt]) for rt in RUNTIMES]
        for _, _, fn in calls:
            for _ in range(args.warmup):
                fn(x)
        times: dict[tuple[str, str], list[float]] = {(m, rt): [] for m, rt, _ in calls}
        for i in interleaved_order(len(calls), args.repeats):
            m, rt, fn = calls[i]
            times[(m, rt)].append(time_call(fn, x, torch.device('cpu')))
    rows = []
    for label in args.models:
        ms = {rt: 1e3 * percentile(times[(label, rt)], 50) for rt in RUNTIMES}
        rows.append(dict(model=label, **ms, diff=diffs[label], threads=threads))
    return rows


def format_table(rows: Sequence[dict], shape: Sequence[int], repeats: int) -> str:
    lines = [
        f'Batch 1, {shape[0]}x{shape[1]}, fp32, CPU, {rows[0]["threads"] if rows else "?"} threads, '
        f'median of {repeats} interleaved calls (ms).',
        '',
        '| model | eager | torch.compile | onnxruntime | eager / compile | eager / onnxruntime | max abs diff ort |',
        '|---|---:|---:|---:|---:|---:|---:|',
    ]
    for r in rows:
        lines.append(
            f'| {r["model"]} | {r["eager"]:.1f} | {r["compile"]:.1f} | {r["onnxruntime"]:.1f} | '
            f'{r["eager"] / r["compile"]:.2f} | {r["eager"] / r["onnxruntime"]:.2f} | {r["diff"]:.2g} |'
        )
    return '\n'.join(lines)


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if any(s % 16 or s < 32 for s in args.shape):
        parser.error(f'--shape must be multiples of 16 and at least 32, got {args.shape}')
    if args.repeats < 1 or args.warmup < 0:
        parser.error(f'--repeats must be >= 1 and --warmup >= 0, got {args.repeats} and {args.warmup}')
    rows = measure(args)
    table = format_table(rows, args.shape, args.repeats)
    print(table)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text('## Deployment: onnxruntime and torch.compile vs eager\n\n' + table + '\n')
    return rows


if __name__ == '__main__':
    main()
    sys.exit(0)
