"""The dry-run and cost tables, from dry-run records (plain dicts, one per recipe, as `dry_run.py` caches them).

A record (`DryRun.record()` in `mmrecvit/benchmark/dry_run.py`) holds what one recipe measured: per iteration
`train` / `test` (`seconds`, `peak_bytes`, `saved_bytes`, `flops`), `batch`, the input shapes, the
`schedule` (`images`, `batch`, `iterations`, `how`), `with_cp` as written and, when measured, `other_cp`: the
training iteration's memory with activation checkpointing the other way. A record with `error` failed.

Costs: per image = per iteration / batch. Training FLOPs are what the training iteration executed (forward,
backward, and the recomputed forward where with_cp is on); the schedule's total = per image x the images the
schedule trains on; GPU hours = total / the sustained rate (`DEFAULT_GPU_RATE` is an assumption, stated as one).
"""

from __future__ import annotations

from collections.abc import Sequence

from .complexity import markdown_table

DEFAULT_GPU_RATE = 100.0  # TFLOP/s sustained per GPU: an assumption (see GPU_RATE_ASSUMPTION)
GPU_RATE_ASSUMPTION = (
    "an assumption, not a measurement: about a third of an A100's dense fp16/bf16 peak "
    '(312 TFLOP/s); a whole detector step (RoI ops, data loading, small kernels) may sustain far '
    'less; '
    "pass `--gpu-rate` with your own, e.g. the TFLOP/s of the recipes rows of scripts/gpu_check.sh's "
    'report (work_dirs/gpu_check/cuda.md: the FLOPs one real training iteration of the recipe executed, '
    'over its time)'
)
MIB = 2**20


def _mib(value: float | None) -> str:
    return '–' if value is None else f'{value / MIB:.0f}'


def _g(value: float | None, digits: int = 1) -> str:
    return '–' if value is None else f'{value / 1e9:.{digits}f}'


def _s(value: float | None) -> str:
    return '–' if value is None else f'{value:.2f}'


def _shape(shape: Sequence[int]) -> str:
    return 'x'.join(map(str, shape[-2:])) if shape else '–'


def _n(value: float) -> str:
    return f'{value:,.0f}' if value >= 100 else f'{value:.3g}'


def median(xs: Sequence[float]) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else 0.5 * (xs[mid - 1] + xs[mid])


def per_image(record: dict, phase: str, key: str) -> float | None:
    value = (record.get(phase) or {}).get(key)
    return None if value is None else value / record['batch']


def cp_memory(record: dict) -> dict[bool, float | None]:
    """Saved activations per image of the training iteration, by with_cp (True/False), where measured."""
    out: dict[bool, float | None] = {True: None, False: None}
    if record.get('with_cp') is not None:
        out[bool(record['with_cp'])] = per_image(record, 'train', 'saved_bytes')
    other = record.get('other_cp')
    if other:
        out[bool(other['with_cp'])] = other['saved_bytes'] / record['batch']
    return out


def dry_run_table(records: Sequence[dict]) -> list[str]:
    header = [
        'recipe',
        'backbone',
        'dtype',
        'batch',
        'train input',
        'train s/iter',
        'train peak MiB/img',
        'saved act. MiB/img',
        'train GFLOPs/iter',
        'test input',
        'test s/iter',
        'test peak MiB/img',
        'test GFLOPs/iter',
        'load',
    ]
    rows = []
    for r in records:
        name = r['name']
        if r.get('error'):
            rows.append([name, r.get('backbone', '–'), '–', '–', f'failed: {r["error"]}'] + [''] * 9)
            continue
        tr, te = r['train'], r.get('test') or {}
        rows.append(
            [
                name,
                r['backbone'] + (' (cp)' if r.get('with_cp') else ''),
                r['dtype'],
                str(r['batch']),
                _shape(r['train_shape']),
                _s(median(tr['seconds'])),
                _mib(per_image(r, 'train', 'peak_bytes')),
                _mib(per_image(r, 'train', 'saved_bytes')),
                _g(tr['flops']),
                _shape(r.get('test_shape', ())),
                _s(median(te.get('seconds', []))),
                _mib(per_image(r, 'test', 'peak_bytes')),
                _g(te.get('flops')),
                '–' if r.get('load') is None else f'{r["load"]:.1f}',
            ]
        )
    return markdown_table(header, rows, 'lllrlrrrrlrrrr')


def cost_rows(records: Sequence[dict], gpu_rate: float) -> list[list[str]]:
    rows = []
    for r in records:
        if r.get('error'):
            continue
        flops = per_image(r, 'train', 'flops')
        total = flops * r['schedule']['images']
        cp = cp_memory(r)
        rows.append(
            [
                r['name'],
                _shape(r['train_shape']),
                _g(flops),
                r['schedule']['how'],
                _n(total / 1e15),
                _mib(cp[False]),
                _mib(cp[True]),
                _n(total / (gpu_rate * 1e12) / 3600),
            ]
        )
    return rows


def cost_table(records: Sequence[dict], gpu_rate: float) -> list[str]:
    header = [
        'recipe',
        'train input',
        'train GFLOPs/img (fwd+bwd)',
        'schedule',
        'PFLOPs',
        'act. MiB/img',
        'act. MiB/img with_cp',
        f'GPU hours @ {gpu_rate:g} TFLOP/s',
    ]
    return markdown_table(header, cost_rows(records, gpu_rate), 'llrlrrrr')
