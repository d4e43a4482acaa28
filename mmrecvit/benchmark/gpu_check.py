"""The GPU check: what a lent GPU runs once (about 10 minutes), every check with a pass/fail threshold.

    bash scripts/gpu_check.sh                 # on a CUDA machine: every check
    bash scripts/gpu_check.sh --cpu           # the CPU dry mode (automatic without CUDA): all that needs no CUDA
    bash scripts/gpu_check.sh --cpu --quick   # tiny models, few cases: what CI runs (tests/scripts/test_gpu_check.py)
    bash scripts/gpu_check.sh --only sync,compile --out /tmp/gpu_check

Run it from a checkout (it reads configs/ and runs tools/). Each check prints one line per case, `PASS|FAIL|SKIP check
case: measured (threshold)`, and the report, a Markdown table, goes to `--out` (default work_dirs/gpu_check/, never
elsewhere in the repository): `cuda.md`, `cpu.md` or `cpu-quick.md`. The exit status is 1 when any case FAILs, known
failures included: `KNOWN_FAILURES` names the cases that fail until another item of issue 48 lands (flip them there as
they do). The checks (`CHECKS`; the model checks in `gpu_check_models.py` and `gpu_check_compile.py`, the recipe and
process checks in `gpu_check_runs.py`, the ops' in `gpu_check_ops.py`):

    recipes      every method's ViTDet Mask R-CNN (4 images per GPU, rel-pos, AMP, with_cp) and UperNet (AMP) recipe
                 at S and B: one real-size training iteration each, a test iteration at S (the dry run,
                 benchmark/dry_run_mm.py), peak memory <= 40 GiB; CPU: the toy recipes through the same machinery
    parity       per method: GPU fp32 (TF32 off) vs CPU fp32, and bf16 / fp16 autocast vs fp32: outputs, routing
                 decisions, router gradients (`gpu_check_models.TOLERANCES`); CPU: bf16 autocast vs fp32
    router_tf32  router and ranker logits with TF32 allowed (TF32Hook's setting) vs fp64 (CPU: oneDNN's bf16 products)
    sync         host syncs in training forward + backward (after warm-up) and in eval: `torch.cuda.set_sync_debug_mode`
                 on a GPU, `host_sync.HostSyncCounter` (a TorchDispatchMode) on the CPU
    attention    the SDPA kernel of every attention call: flash / memory-efficient / cuDNN (CPU: its flash kernel), not
                 the unfused math path, on the dense path and in the recipes' windows with rel-pos
    compile      torch.compile (dynamo, eager backend): graphs at the first call, recompiles over later iterations and
                 new inputs of the same shape, in training and eval
    ddp / fsdp   a 1-process DDP (find_unused_parameters=False, the recipes') / FSDP2 (per block, bf16 parameters)
                 training step, twice, per method: NCCL on a GPU, gloo on the CPU
    dist_train   `tools/dist_train.sh` trains the toy Mask R-CNN for 2 iterations (1 process)
    revit_dropout  reViT at batch 64: block calls per forward (12 at any batch) and the training step's time with step
                 dropout 0.3 over without (at most 0.80: it does 30 % less work)
    mmcv_ops     RoIAlign forward / backward (fp32, fp16) and NMS on the device against the CPU (mmcv-lite's table)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import fnmatch
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch

from . import gpu_check_compile as compiling
from . import gpu_check_models as models
from . import gpu_check_ops as ops
from . import gpu_check_runs as runs
from .gpu_check_results import REPO, Result, Setup, guarded

# Cases that FAIL today for what another item of issue 48 fixes (check/case patterns, fnmatch) -> the item. The lead
# removes an entry when its item lands; the CI test (tests/scripts/test_gpu_check.py) asserts every other case passes.
KNOWN_FAILURES: dict[str, str] = {}


CHECKS: dict[str, Callable[[Setup], Iterator[Result]]] = {
    'recipes': runs.recipes,
    'parity': models.parity,
    'router_tf32': models.router_tf32,
    'sync': models.sync,
    'attention': models.attention,
    'compile': compiling.compiled,
    'ddp': runs.ddp,
    'fsdp': runs.fsdp,
    'dist_train': runs.dist_train,
    'revit_dropout': compiling.revit_dropout,
    'mmcv_ops': ops.mmcv_ops,
}


def known(result: Result) -> str:
    """The issue item `result`'s case is known to fail until ('' for none), from `KNOWN_FAILURES`."""
    return next((item for pattern, item in KNOWN_FAILURES.items() if fnmatch.fnmatchcase(result.id, pattern)), '')


def line(result: Result) -> str:
    """`PASS|FAIL|SKIP check case: measured (threshold)`, and the item of a known failure."""
    until = f' [known until {known(result)}]' if result.passed is False and known(result) else ''
    return f'{result.status} {result.check} {result.case}: {result.measured} (threshold {result.threshold}){until}'


def run_checks(setup: Setup, names: Sequence[str], say: Callable[[str], None] = print) -> list[Result]:
    """Every case of the named checks, in `CHECKS` order, each printed as it finishes."""
    results = []
    for name, check in CHECKS.items():
        if name not in names:
            continue
        start = time.perf_counter()
        with precision_flags():
            for result in guarded(name, 'all', lambda check=check: check(setup)):
                say(line(result))
                results.append(result)
        say(f'  ({name}: {time.perf_counter() - start:.1f} s)')
    return results


@contextlib.contextmanager
def precision_flags() -> Iterator[None]:
    """The process-wide precision flags put back after a check (a recipe's TF32Hook sets TF32 on, for one)."""
    flags = (torch.backends.cuda.matmul, 'allow_tf32'), (torch.backends.cudnn, 'allow_tf32')
    before = [getattr(*flag) for flag in flags], torch.get_float32_matmul_precision()
    try:
        yield
    finally:
        for flag, value in zip(flags, before[0]):
            setattr(*flag, value)
        torch.set_float32_matmul_precision(before[1])


def _commit() -> str:
    try:
        out = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=REPO, capture_output=True, text=True)
    except OSError:
        return 'unknown'
    return out.stdout.strip() or 'unknown'


def report(setup: Setup, results: Sequence[Result], command: str, seconds: float) -> str:
    """The Markdown report: a header saying where and what, then one table row per case."""
    where = (
        torch.cuda.get_device_name(setup.device) if setup.cuda else 'CPU dry mode' + (', quick' if setup.quick else '')
    )
    counts = {s: sum(r.status == s for r in results) for s in ('PASS', 'FAIL', 'SKIP')}
    known_fails = sum(bool(known(r)) and r.passed is False for r in results)
    lines = [
        f'# GPU check: {where}',
        '',
        f'`{command}` on {datetime.datetime.now().isoformat(timespec="seconds")}, commit {_commit()}, torch '
        f'{torch.__version__} (CUDA {torch.version.cuda}), {seconds / 60:.1f} min. {counts["PASS"]} PASS, '
        f'{counts["FAIL"]} FAIL ({known_fails} known until another item of issue 48 lands), {counts["SKIP"]} SKIP. '
        'What each check does and its thresholds: mmrecvit/benchmark/gpu_check.py.',
        '',
        '| check | case | measured | threshold | status | known failure until |',
        '|---|---|---|---|---|---|',
    ]
    for r in results:
        cells = (r.check, r.case, r.measured, r.threshold, r.status, known(r) if r.passed is False else '')
        lines.append('| ' + ' | '.join(str(c).replace('|', '/') for c in cells) + ' |')
    return '\n'.join(lines) + '\n'


def out_dir(path: str) -> Path:
    """`--out`, refused inside the repository unless under its work_dirs/ (git-ignored)."""
    out = Path(path).resolve()
    inside = out == REPO or REPO in out.parents
    if inside and not (out == REPO / 'work_dirs' or (REPO / 'work_dirs') in out.parents) and (REPO / '.git').exists():
        raise SystemExit(
            f'gpu_check: --out {path} is inside the repository; use work_dirs/... (git-ignored) or a folder outside it'
        )
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument('--cpu', action='store_true', help='the CPU dry mode (automatic when CUDA is not available)')
    p.add_argument(
        '--quick', action='store_true', help='tiny models and few cases (CI); implies nothing about the device'
    )
    p.add_argument('--only', default=','.join(CHECKS), help=f'comma-separated checks, of: {",".join(CHECKS)}')
    p.add_argument('--out', default=str(REPO / 'work_dirs' / 'gpu_check'), help='report folder (default %(default)s)')
    args = p.parse_args(argv)
    names = [n.strip() for n in args.only.split(',') if n.strip()]
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        p.error(f'--only: unknown check {unknown[0]!r}; the checks: {", ".join(CHECKS)}')
    args.only = names
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not (REPO / 'configs').is_dir() or not (REPO / 'tools').is_dir():
        raise SystemExit(f'gpu_check: {REPO} has no configs/ and tools/: run it from a checkout (scripts/gpu_check.sh)')
    out = out_dir(args.out)
    cuda = torch.cuda.is_available() and not args.cpu
    name = 'cuda' if cuda else 'cpu-quick' if args.quick else 'cpu'
    setup = Setup(torch.device('cuda' if cuda else 'cpu'), args.quick, out / f'{name}_work')
    setup.work.mkdir(parents=True, exist_ok=True)
    print(f'gpu_check: {name} on {torch.cuda.get_device_name() if cuda else "the CPU"}; checks: {", ".join(args.only)}')
    start = time.perf_counter()
    results = run_checks(setup, args.only)
    command = 'bash scripts/gpu_check.sh ' + ' '.join(sys.argv[1:] if argv is None else argv)
    path = out / f'{name}.md'
    path.write_text(report(setup, results, command.strip(), time.perf_counter() - start))
    records = [dict(dataclasses.asdict(r), status=r.status, known=known(r)) for r in results]
    path.with_suffix('.json').write_text(json.dumps(records, indent=1))  # the same rows, for tools and the CI test
    fails = [r for r in results if r.passed is False]
    print(
        f'gpu_check: {len(results)} cases, {len(fails)} FAIL ({sum(bool(known(r)) for r in fails)} known); wrote {path}'
    )
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
