"""Latency, throughput, peak memory and FLOP efficiency of models side by side.

Every performance figure in the README comes from this script. Models are measured in one run with
interleaved repeats after a warm-up, at a fixed thread count, in eval mode under
`torch.inference_mode()`; the output is a Markdown table (stdout, `--out`) and optionally a CSV.
See `mmrecvit/benchmark/` (`timing.py`) for what exactly is measured.

Model specs, each optionally labelled `label=SPEC` (quote them for the shell):
  'PlainViT(arch="small")'                 a backbone of mmrecvit.models.BACKBONES, literal kwargs
  timm:vit_small_patch16_224               a timm model (timed via forward_intermediates, 4 maps)
  configs/seg/upernet_plainvit-s_8xb2-160k_ade20k-512x512.py
                                           the backbone of a config (kwargs override it), or with
                                           --whole (or whole=True) the whole detector/segmentor/classifier

Harness kwargs, taken out of a spec's kwargs before the model is built (never passed to it):
  forced_mean_depth=M                      run a token-adaptive backbone (EdgeRecViT) on a fixed,
                                           seeded depth pattern of per-image mean M instead of its
                                           ranker's choice; its depth_shift/max_depth still apply;
                                           M=L is the same model at full depth
  forced_depth_seed=S                      the seed of that pattern (default 0)

Examples (the README's tables; scripts/benchmarks.sh runs them all):
  # the first README table, PlainViT-S vs timm ViT-S
  python tools/analysis_tools/benchmark.py ours='PlainViT(arch="small")' timm=timm:vit_small_patch16_224 \\
      --batch 1 8 --size 224 --reference timm --out bench.md --csv bench.csv
  # SR-ViT eval memory flat in T (memory ratio column; --repeats 0 for memory only)
  python tools/analysis_tools/benchmark.py T1='SRViT(arch="small", num_recursions=1)' \\
      T4='SRViT(arch="small", num_recursions=4)' --batch 8 --size 512 --repeats 5
  # reViT online merge vs its folded twin (a PlainViT of the same size: same work)
  python tools/analysis_tools/benchmark.py folded='PlainViT(arch="small")' \\
      online='ReViT(arch="small", num_experts=4)' --batch 1 8 --size 224
  # Edge-RecViT forced depths vs full depth (speed-up, FLOP ratio, quotient columns)
  python tools/analysis_tools/benchmark.py full='EdgeRecViT(arch="small", forced_mean_depth=12)' \\
      paper='EdgeRecViT(arch="small", forced_mean_depth=8.3)' half='EdgeRecViT(arch="small", forced_mean_depth=6)' \\
      --batch 1 4 --size 512
  # whole detectors/segmentors (untimed data preprocessor), CSV
  python tools/analysis_tools/benchmark.py configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py \\
      configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py --whole --size 512 --csv whole.csv
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from mmrecvit.benchmark import (
    DTYPES,
    STATISTICS,
    WHOLE_MODES,
    BenchConfig,
    SpecError,
    build_model,
    format_markdown,
    parse_specs,
    physical_cores,
    run_benchmark,
    write_csv,
)
from mmrecvit.inputs import bad_input, tool_parser

REPO = Path(__file__).resolve().parents[2]  # the checkout of this tool: its commit names mmrecvit in the report


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be a positive integer, got {text}')
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f'must be >= 0, got {text}')
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser('tools/analysis_tools/benchmark.py', __doc__)
    parser.add_argument('models', nargs='+', metavar='[LABEL=]SPEC', help='models to compare (see below)')
    parser.add_argument('--batch', nargs='+', type=positive_int, default=[1], help='batch sizes (default: 1)')
    parser.add_argument(
        '--size',
        nargs='+',
        type=positive_int,
        default=[224],
        metavar='PX',
        help='input size in pixels: H for a square, or H W (default: 224)',
    )
    parser.add_argument('--device', choices=['cpu', 'cuda'], default='cpu')
    parser.add_argument(
        '--threads',
        type=positive_int,
        default=None,
        help=f'torch threads (default: physical cores, here {physical_cores()})',
    )
    parser.add_argument(
        '--dtype',
        choices=list(DTYPES),
        default='fp32',
        help='fp32 (default), or autocast to bf16/fp16 with fp32 weights',
    )
    parser.add_argument('--amp', action='store_true', help='autocast: bf16 on cpu, fp16 on cuda')
    parser.add_argument('--warmup', type=non_negative_int, default=3, help='untimed forwards per model and batch')
    parser.add_argument(
        '--repeats',
        type=non_negative_int,
        default=15,
        help='timed forwards per model and batch, interleaved (0: memory only)',
    )
    parser.add_argument(
        '--stat',
        choices=STATISTICS,
        default='median',
        help='latency behind throughput, FLOP/s and ratios: median (default), or min (the fastest '
        'repeat: more robust on a machine shared with other jobs)',
    )
    parser.add_argument('--reference', default=None, help='label the ratios are taken against (default: the first)')
    parser.add_argument(
        '--whole',
        action='store_true',
        help='config specs: time the whole detector/segmentor/classifier (needs its framework)',
    )
    parser.add_argument(
        '--whole-mode',
        choices=WHOLE_MODES,
        default='tensor',
        help="forward mode of whole models (default: 'tensor', no post-processing)",
    )
    parser.add_argument('--no-memory', dest='memory', action='store_false', help='skip the peak-memory pass')
    parser.add_argument(
        '--mode',
        choices=['inference', 'train'],
        default='inference',
        help='time a forward in eval mode (default), or a training step: train mode, forward, '
        'backward, AdamW step (what a GPU user pays per iteration)',
    )
    parser.add_argument(
        '--peak-size',
        type=positive_int,
        default=None,
        help='n of the n^3 matmul measuring the machine peak (default: 2048 cpu, 8192 cuda)',
    )
    parser.add_argument('--seed', type=int, default=0, help='seed of the weights and the input images')
    parser.add_argument('--out', default=None, help='also write the Markdown report to this file')
    parser.add_argument('--title', default=None, help='a heading for the report (docs/benchmarks.md sections)')
    parser.add_argument('--about', default=None, help='a paragraph under the heading: what is measured and why')
    parser.add_argument('--csv', default=None, help='also write one CSV row per model and batch')
    parser.add_argument('--no-progress', dest='progress', action='store_false', help='no progress bar')
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(args.size) > 2:
        parser.error(f'--size takes H or H W, got {len(args.size)} numbers')
    hw = (args.size[0], args.size[-1])
    dtype = args.dtype
    if args.amp:
        if dtype != 'fp32':
            parser.error('give either --amp or --dtype, not both')
        dtype = 'fp16' if args.device == 'cuda' else 'bf16'
    if args.repeats == 0 and not args.memory:
        parser.error('nothing to measure: --repeats 0 together with --no-memory')
    if args.mode == 'train' and args.whole:
        parser.error('--mode train times backbones (a whole detector needs annotations for its losses)')
    try:
        specs = parse_specs(args.models)
        labels = [s.label for s in specs]
        if args.reference is not None and args.reference not in labels:
            parser.error(f'--reference {args.reference!r} is not one of the labels {labels}')
        models = []
        with bad_input(parser.prog):  # a wrong argument name or value, or `type`, of a config's model: one line
            for spec in specs:
                torch.manual_seed(args.seed)
                models.append(build_model(spec, hw, whole=args.whole, whole_mode=args.whole_mode))
    except SpecError as e:
        parser.error(str(e))
    same = ('device', 'threads', 'warmup', 'repeats', 'memory', 'peak_size', 'seed', 'progress', 'mode')  # as named
    config = BenchConfig(
        batches=args.batch, hw=hw, dtype=dtype, statistic=args.stat, **{k: getattr(args, k) for k in same}
    )
    result = run_benchmark(models, config, reference=args.reference, checkout=REPO)
    result.command = ' '.join(['python', parser.prog] + [shlex.quote(a) for a in argv])
    report = format_markdown(result, args.title, args.about)
    print(report, end='')
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(report)
    if args.csv:
        write_csv(result, args.csv)
    return 0


if __name__ == '__main__':
    sys.exit(main())
