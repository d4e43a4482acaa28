"""Reports of a `BenchResult`: one Markdown table (what the README shows) and a CSV of every raw number."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from .timing import BenchResult, percentile


def _fmt(value: float | None, digits: int = 2, scale: float = 1.0) -> str:
    return '–' if value is None else f'{value * scale:.{digits}f}'


def _ms(value: float | None) -> str:
    if value is None:
        return '–'
    ms = value * 1e3
    return f'{ms:.1f}' if ms >= 100 else f'{ms:.2f}'


def format_markdown(result: BenchResult, title: str | None = None, about: str | None = None) -> str:
    """The report: a `title` heading and `about` paragraph if given, the command, the environment,
    one table (rows grouped by batch) and what was timed."""
    peak = result.peak_flops
    lines = []
    if title:
        lines += [f'## {title}', '']
    if about:
        lines += [about, '']
    if result.command:
        lines += ['```', result.command, '```', '']
    for key, value in result.env.items():
        lines.append(f'- {key}: {value}')
    if peak is not None:
        n = result.config.peak_size or (8192 if result.config.device == 'cuda' else 2048)
        medians = {r.batch: r.matmul_flops for r in result.rows if r.matmul_flops is not None}
        stat = result.config.statistic
        during = (
            f'; {"fastest" if stat == "min" else "median"} during the timing of '
            + ', '.join(f'batch {b}: {v / 1e9:.1f}' for b, v in medians.items())
            if medians
            else ''
        )
        lines.append(
            f'- matmul ({result.config.dtype} {n}³ `torch.mm`): best {peak / 1e9:.1f} GFLOP/s{during} '
            '(the % of matmul column divides by the latter)'
        )
    lines.append(f'- reference for the ratios: **{result.reference}**')
    lines.append('')
    head = [
        'model',
        'batch',
        f'latency ms ({result.config.statistic})',
        'IQR ms',
        'min–max ms',
        'images/s',
        'GFLOPs/img',
        '% of matmul',
        'peak mem MiB',
        'params M',
        'latency ratio',
        'speed-up',
        'ideal speed-up (FLOP ratio)',
        'quotient',
        'memory ratio',
    ]
    lines.append('| ' + ' | '.join(head) + ' |')
    lines.append('|' + '|'.join(['---'] + ['---:'] * (len(head) - 1)) + '|')
    for r in result.rows:
        minmax = f'{_ms(min(r.samples_s))}–{_ms(max(r.samples_s))}' if r.samples_s else '–'
        mib = None if r.peak_bytes is None else r.peak_bytes / 2**20
        cells = [
            r.label,
            str(r.batch),
            _ms(r.latency_s),
            _ms(r.iqr_s),
            minmax,
            _fmt(r.images_per_s, 1),
            _fmt(r.flops_per_image, 2, 1e-9),
            _fmt(r.peak_fraction, 1, 100.0),
            _fmt(mib, 1 if (mib or 0) >= 100 else 2),
            _fmt(r.params, 2, 1e-6),
            _fmt(r.latency_ratio, 3),
            _fmt(r.speedup, 3),
            _fmt(r.ideal_speedup, 3),
            _fmt(r.quotient, 3),
            _fmt(r.memory_ratio, 3),
        ]
        lines.append('| ' + ' | '.join(c.replace('|', '\\|') for c in cells) + ' |')
    lines.append('')
    lines.append('Timed per model:')
    for label, timed, _ in result.models:
        lines.append(f'- **{label}**: {timed}')
    lines.append('')
    what = 'one forward' if result.config.mode == 'inference' else 'one training step'
    lines.append(
        f'Latency: wall time of {what}; peak mem: tensors allocated during {what} '
        '(untimed pass; parameters and input not counted); GFLOPs: analytic, per image, of the forward, '
        'only the tokens each step processed; quotient = speed-up / ideal speed-up.'
    )
    return '\n'.join(lines) + '\n'


CSV_FIELDS = [
    'label',
    'batch',
    'height',
    'width',
    'device',
    'dtype',
    'threads',
    'statistic',
    'latency_ms_median',
    'latency_ms_q25',
    'latency_ms_q75',
    'latency_ms_min',
    'latency_ms_max',
    'latency_ms_mean',
    'n',
    'images_per_s',
    'gflops_per_image',
    'achieved_gflops_per_s',
    'matmul_best_gflops_per_s',
    'matmul_median_gflops_per_s',
    'peak_fraction',
    'peak_mem_mib',
    'params_m',
    'reference',
    'latency_ratio',
    'speedup',
    'ideal_speedup',
    'quotient',
    'memory_ratio',
    'date',
]


def csv_rows(result: BenchResult) -> list[dict[str, Any]]:
    """One dict per row, with every raw number (seconds converted to ms, bytes to MiB)."""
    out = []
    peak = result.peak_flops
    for r in result.rows:
        s = r.samples_s

        def ms(v: float | None) -> float | None:
            return None if v is None else v * 1e3

        achieved = r.achieved_flops
        out.append(
            dict(
                label=r.label,
                batch=r.batch,
                height=result.config.hw[0],
                width=result.config.hw[1],
                device=result.config.device,
                dtype=result.config.dtype,
                threads=result.env.get('threads'),
                statistic=r.statistic,
                latency_ms_median=ms(r.median_s),
                latency_ms_q25=ms(percentile(s, 25)) if s else None,
                latency_ms_q75=ms(percentile(s, 75)) if s else None,
                latency_ms_min=ms(min(s)) if s else None,
                latency_ms_max=ms(max(s)) if s else None,
                latency_ms_mean=ms(sum(s) / len(s)) if s else None,
                n=len(s),
                images_per_s=r.images_per_s,
                gflops_per_image=None if r.flops_per_image is None else r.flops_per_image / 1e9,
                achieved_gflops_per_s=None if achieved is None else achieved / 1e9,
                matmul_best_gflops_per_s=None if peak is None else peak / 1e9,
                matmul_median_gflops_per_s=None if r.matmul_flops is None else r.matmul_flops / 1e9,
                peak_fraction=r.peak_fraction,
                peak_mem_mib=None if r.peak_bytes is None else r.peak_bytes / 2**20,
                params_m=r.params / 1e6,
                reference=result.reference,
                latency_ratio=r.latency_ratio,
                speedup=r.speedup,
                ideal_speedup=r.ideal_speedup,
                quotient=r.quotient,
                memory_ratio=r.memory_ratio,
                date=result.env.get('date'),
            )
        )
    return out


def write_csv(result: BenchResult, path: str | os.PathLike) -> None:
    """Write `csv_rows(result)` with a header (empty cells for numbers that do not apply)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open('w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in csv_rows(result):
            writer.writerow({k: '' if v is None else v for k, v in row.items()})
