"""Accuracy vs compute: evaluate models at several settings of the test-time `compute` knob.

    python tools/analysis_tools/compute_curve.py CONFIG CHECKPOINT [CONFIG CHECKPOINT ...] \\
        [--compute 0.4 0.6 0.8 1.0] [--out-dir DIR] [--cfg-options KEY=VALUE ...]

For each (config, checkpoint) pair and each fraction c, the config's model is built with
`model.backbone.compute = c` (`mmrecvit/models/compute.py`: c of the backbone's full-depth FLOPs,
mapped onto each method's own mechanism) and evaluated on the config's test set through mmengine's
Runner test loop with the config's own metric (CocoMetric, IoUMetric, Accuracy), as tools/test.py
does. At each setting the backbone's GFLOPs (its analytic count, the forward's `stats.flops`, 2 x MACs
per image, the mean over the first `--flops-images` test inputs after the data preprocessor) and its
latency (the median of `--latency-runs` timed forwards of the first test input, after one warm-up)
are measured.

Writes `DIR/compute_curve.csv` (one row per model and setting, every metric) and
`DIR/compute_curve.png` (the main metric vs backbone GFLOPs, one line per model, labelled by config
stem). CHECKPOINT `none` evaluates the config's own initialisation (random for the toy configs).
`--cfg-options` applies to every config (e.g. toy data roots).
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm import tqdm

import mmrecvit.mm  # noqa: F401  (compat fixes + registration)
from mmrecvit.inputs import bad_input, checkpoint_file, config_file, tool_parser
from mmrecvit.mm import cli
from mmrecvit.mm.tooling import add_cfg_options, in_percent
from mmrecvit.models.compute import check_compute

# The metric each framework's configs report first (the curve's y axis); the CSV keeps all of them.
MAIN_METRICS = ('coco/bbox_mAP', 'mIoU', 'accuracy/top1')
COLUMNS = ('label', 'config', 'checkpoint', 'compute', 'backbone_gflops', 'latency_ms', 'metric', 'value', 'metrics')


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser('tools/analysis_tools/compute_curve.py', __doc__)
    parser.add_argument(
        'pairs',
        nargs='+',
        metavar='CONFIG CHECKPOINT',
        help="config files, each followed by its checkpoint ('none': the config's own init)",
    )
    parser.add_argument(
        '--compute',
        type=float,
        nargs='+',
        default=[0.4, 0.6, 0.8, 1.0],
        help='fractions in (0, 1] of the full-depth backbone FLOPs (default 0.4 0.6 0.8 1.0)',
    )
    parser.add_argument('--out-dir', default='work_dirs/compute_curve', help='where the CSV and PNG go')
    parser.add_argument('--work-dir', default=None, help="the Runners' work dirs (default: OUT_DIR/work)")
    parser.add_argument(
        '--metric',
        default=None,
        help=f'the metric to plot (default: the first of {MAIN_METRICS} the evaluator reports)',
    )
    parser.add_argument('--flops-images', type=int, default=4, help='test inputs the GFLOPs are averaged over')
    parser.add_argument('--latency-runs', type=int, default=5, help='timed backbone forwards per setting')
    add_cfg_options(parser, 'settings of every config', 'tools/test.py')
    return parser


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if len(args.pairs) % 2:
        parser.error(f'give CONFIG CHECKPOINT pairs, got {len(args.pairs)} paths: {args.pairs}')
    try:
        fractions = [check_compute(c) for c in args.compute]
    except (TypeError, ValueError) as e:
        parser.error(f'--compute: {e}')
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work_root = Path(args.work_dir) if args.work_dir else out_dir / 'work'
    with bad_input(parser.prog):  # a wrong file: one line, before any evaluation starts
        pairs = [(config_file(c), checkpoint_file(k) or 'none') for c, k in zip(args.pairs[::2], args.pairs[1::2])]
    rows = []
    with tqdm(total=len(pairs) * len(fractions), desc='compute settings', unit='setting') as bar:
        for (config, checkpoint), label in zip(pairs, labels(pairs)):
            for fraction in fractions:
                bar.set_postfix_str(f'{label} compute={fraction:g}')
                row = evaluate(config, checkpoint, fraction, args, work_root / label / f'compute{fraction:g}')
                rows.append(dict(row, label=label))
                bar.update()
    write_csv(rows, out_dir / 'compute_curve.csv')
    plot(rows, out_dir / 'compute_curve.png')
    print(f'wrote {out_dir / "compute_curve.csv"} and {out_dir / "compute_curve.png"}')
    return rows


def labels(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Each model's label: its config stem, with the checkpoint's stem when a config comes twice."""
    stems = [Path(config).stem for config, _ in pairs]
    return [s if stems.count(s) == 1 else f'{s} ({Path(ckpt).stem})' for s, (_, ckpt) in zip(stems, pairs)]


def evaluate(config: str, checkpoint: str, fraction: float, args: argparse.Namespace, work_dir: Path) -> dict:
    """One model at one setting: the test loop's metrics, backbone GFLOPs and latency."""
    cfg = cli.load_config(
        argparse.Namespace(config=config, launcher='none', cfg_options=args.cfg_options, work_dir=str(work_dir))
    )
    cfg.model.backbone.compute = fraction
    cfg.load_from = None if checkpoint.lower() == 'none' else checkpoint
    cfg.log_level = 'WARNING'  # the progress bar, not the Runner's log
    cfg.experiment_name = f'{Path(config).stem}_compute{fraction:g}'  # mmengine adds the time, build_runner _run<n>
    runner = cli.build_runner(cfg, 'none', tool='compute_curve.py')
    metrics = runner.test()
    gflops, latency = measure_backbone(runner, args.flops_images, args.latency_runs)
    cli.release_workers(runner)  # one Runner per model and setting: not 5 s per worker when garbage-collected
    name = args.metric or next((m for m in MAIN_METRICS if m in metrics), next(iter(metrics)))
    if name not in metrics:
        raise SystemExit(f'--metric {name!r} is not among the metrics of {config}: {sorted(metrics)}')
    return dict(
        label=Path(config).stem,
        config=config,
        checkpoint=checkpoint,
        compute=fraction,
        backbone_gflops=gflops,
        latency_ms=latency,
        metric=name,
        value=float(in_percent(metrics)[name]),  # in percent: 54.0 AP, 30.3 mIoU
        metrics=json.dumps({k: float(v) for k, v in metrics.items()}, sort_keys=True),
    )


@torch.no_grad()
def measure_backbone(runner, num_images: int, runs: int) -> tuple[float, float]:
    """Mean backbone GFLOPs over the first test inputs (`stats.flops`), and the median latency (ms)
    of the backbone on the first one."""
    model = runner.model
    model.eval()
    backbone, flops, first = model.backbone, [], None
    for i, data in enumerate(runner.test_dataloader):
        if i >= num_images:
            break
        inputs = model.data_preprocessor(copy.copy(data), False)['inputs']
        for image in inputs.split(1):
            backbone(image)  # a first forward fills what a backbone caches (reViT's merged experts)
            flops.append(backbone(image).stats.flops)
            first = image if first is None else first
    if first is None:
        raise SystemExit('the test dataloader gave no data')
    backbone(first)
    times = []
    for _ in range(max(1, runs)):
        if first.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        backbone(first)
        if first.is_cuda:
            torch.cuda.synchronize()
        times.append(1e3 * (time.perf_counter() - start))
    return sum(flops) / len(flops) / 1e9, statistics.median(times)


def write_csv(rows: list[dict], path: Path) -> None:
    with open(path, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f'{v:.6g}' if isinstance(v, float) else v for k, v in row.items()})


def plot(rows: list[dict], path: Path) -> None:
    """The main metric vs backbone GFLOPs, one line per model (labelled by config stem)."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label in dict.fromkeys(r['label'] for r in rows):
        points = sorted((r['backbone_gflops'], r['value'], r['compute']) for r in rows if r['label'] == label)
        ax.plot([p[0] for p in points], [p[1] for p in points], 'o-', label=label)
        for x, y, c in points:
            ax.annotate(f'{c:g}', (x, y), textcoords='offset points', xytext=(3, 3), fontsize=7)
    ax.set_xlabel('backbone GFLOPs per image (2 x MACs, analytic count)')
    ax.set_ylabel(' / '.join(dict.fromkeys(r['metric'] for r in rows)) + ' (%)')
    ax.set_title('accuracy vs test-time compute (points labelled by compute)')
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == '__main__':
    main()
