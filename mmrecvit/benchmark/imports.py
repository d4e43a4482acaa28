"""What an import costs, measured in fresh interpreters: `import mmrecvit` beside `import timm` (issue 47.1).

Each statement runs in a new Python process (this interpreter, this environment), timed around the statement
alone (`time.perf_counter`): the interpreter's start-up is the same for every statement and not counted, and no
module is imported already. Bytecode is cached as in an installed environment, in a folder of the run's own
(`-X pycache_prefix`; `PYTHONDONTWRITEBYTECODE` is lifted for it), so no statement pays for compiling its
sources and nothing is written beside them. Statements alternate round by round (`timing.interleaved_order`)
after one untimed round that warms the file cache and writes that bytecode; the median of each and its ratio to
the first statement's are reported, with the top-level modules it imports that the first does not.
`tools/analysis_tools/import_time.py` is the command line; `scripts/benchmarks.sh imports` writes
benchmarks/import_time.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from .timing import interleaved_order

# Run as `python -c PROBE STATEMENT`: prints the seconds the statement took, then the top-level modules it added.
PROBE = """import sys, time
before = {m.partition('.')[0] for m in sys.modules}
start = time.perf_counter()
exec(sys.argv[1])
print(time.perf_counter() - start)
print(*sorted({m.partition('.')[0] for m in sys.modules} - before))
"""


@dataclass
class ImportRow:
    """One statement: its timed runs (seconds) and the top-level modules it imports."""

    statement: str
    seconds: list[float]
    modules: tuple[str, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def time_import(
    statement: str, python: str = sys.executable, pycache: str | None = None
) -> tuple[float, tuple[str, ...]]:
    """Seconds `statement` takes in a fresh `python`, and the top-level modules it imports; `pycache`: the folder
    its bytecode is cached in (default: Python's own choice, as the environment says)."""
    cmd, env = [python, '-c', PROBE, statement], None
    if pycache is not None:
        cmd[1:1] = ['-X', f'pycache_prefix={pycache}']
        env = {k: v for k, v in os.environ.items() if k != 'PYTHONDONTWRITEBYTECODE'}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, env=env)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ['(no message)'])[-1]
        raise RuntimeError(f'{statement!r} fails in a fresh interpreter: {last}')
    seconds, _, modules = res.stdout.partition('\n')
    return float(seconds), tuple(modules.split())


def measure_imports(statements: Sequence[str], repeats: int = 15, python: str = sys.executable) -> list[ImportRow]:
    """Every statement `repeats` times in fresh interpreters, interleaved, after one untimed round; bytecode in a
    folder of the run's own."""
    if repeats < 1:
        raise ValueError(f'repeats must be at least 1, got {repeats}')
    with tempfile.TemporaryDirectory(prefix='import_time_') as pycache:
        rows = [ImportRow(s, [], time_import(s, python, pycache)[1]) for s in statements]  # the untimed round
        for i in interleaved_order(len(rows), repeats):
            rows[i].seconds.append(time_import(rows[i].statement, python, pycache)[0])
    return rows


def format_table(rows: Sequence[ImportRow], shown: int = 12) -> str:
    """Markdown: median seconds and ratio to the first row, and the top-level modules beyond the first row's
    (at most `shown` named)."""
    ref = rows[0]
    lines = [
        f'| statement | median (s) | min (s) | / `{ref.statement}` | top-level modules | beyond `{ref.statement}` |',
        '|---|---:|---:|---:|---:|---|',
    ]
    for r in rows:
        extra = sorted(set(r.modules) - set(ref.modules))
        named = ', '.join(extra[:shown]) + (f' (+{len(extra) - shown} more)' if len(extra) > shown else '')
        lines.append(
            f'| `{r.statement}` | {r.median:.3f} | {min(r.seconds):.3f} | {r.median / ref.median:.3f} | '
            f'{len(r.modules)} | {named or "–"} |'
        )
    return '\n'.join(lines)
