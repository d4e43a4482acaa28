"""What `import mmrecvit` costs beside `import timm`, in fresh interpreters (mmrecvit/benchmark/imports.py).

    python tools/analysis_tools/import_time.py                       # timm, mmrecvit, mmrecvit.mm; 15 rounds
    python tools/analysis_tools/import_time.py 'import timm' 'import mmrecvit.d2' --repeats 5
    python tools/analysis_tools/import_time.py --out benchmarks/import_time.md

The first statement is the reference. Target (issue 47.1): `import mmrecvit` at most 1.1x `import timm`, importing
no top-level module beyond timm's but mmrecvit (tests/test_package.py checks the modules).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from mmrecvit.benchmark.imports import format_table, measure_imports
from mmrecvit.benchmark.machine import environment

STATEMENTS = ('import timm', 'import mmrecvit', 'import mmrecvit.mm')


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('statements', nargs='*', default=list(STATEMENTS), help='the first is the reference')
    parser.add_argument('--repeats', type=int, default=15, help='timed fresh interpreters per statement')
    parser.add_argument('--out', help='write the Markdown report here')
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f'--repeats must be at least 1, got {args.repeats}')
    rows = measure_imports(args.statements, args.repeats)
    env = environment('cpu', 1, {'timed': 'each statement alone, in a fresh interpreter (start-up not counted)'})
    report = '\n'.join(
        [
            '## Import time: `import mmrecvit` beside `import timm`',
            '',
            f'Command: `python tools/analysis_tools/import_time.py {shlex.join(args.statements)} '
            f'--repeats {args.repeats}`. {args.repeats} interleaved rounds after one untimed round; '
            + '; '.join(f'{k}: {v}' for k, v in env.items())
            + '. Target (issue 47.1): `import mmrecvit` <= 1.1x `import timm`, importing no top-level module '
            "beyond timm's but mmrecvit.",
            '',
            format_table(rows),
            '',
        ]
    )
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    return report


if __name__ == '__main__':
    sys.exit(0 if main() else 1)
