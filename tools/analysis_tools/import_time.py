"""What `import mmrecvit` costs beside `import timm`, in fresh interpreters (mmrecvit/benchmark/imports.py).

    python tools/analysis_tools/import_time.py                       # timm, mmrecvit, mmrecvit.mm; 15 rounds
    python tools/analysis_tools/import_time.py 'import timm' 'import mmrecvit.d2' --repeats 5
    python tools/analysis_tools/import_time.py --out benchmarks/import_time.md

The first statement is the reference. Target (issue 47.1): `import mmrecvit` at most 1.1x `import timm`, importing
no top-level module beyond timm's but mmrecvit (tests/test_package.py checks the modules).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from mmrecvit.benchmark.imports import format_table, measure_imports
from mmrecvit.benchmark.machine import environment
from mmrecvit.inputs import tool_parser

STATEMENTS = ('import timm', 'import mmrecvit', 'import mmrecvit.mm')


def main(argv: list[str] | None = None) -> str:
    parser = tool_parser('tools/analysis_tools/import_time.py', __doc__)
    parser.add_argument('statements', nargs='*', default=list(STATEMENTS), help='the first is the reference')
    parser.add_argument('--repeats', type=int, default=15, help='timed fresh interpreters per statement')
    parser.add_argument('--out', help='write the Markdown report here')
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f'--repeats must be at least 1, got {args.repeats}')
    rows = measure_imports(args.statements, args.repeats)
    timed = 'each statement alone, in a fresh interpreter (start-up not counted), bytecode cached'
    facts = '; '.join(f'{k}: {v}' for k, v in environment('cpu', 1, {'timed': timed}).items())
    command = f'python tools/analysis_tools/import_time.py {shlex.join(args.statements)} --repeats {args.repeats}'
    report = (
        f'## Import time: `import mmrecvit` beside `import timm`\n\nCommand: `{command}`. {args.repeats} interleaved '
        f'rounds after one untimed round; {facts}. Target (issue 47.1): `import mmrecvit` <= 1.1x `import timm`, '
        f"importing no top-level module beyond timm's but mmrecvit.\n\n{format_table(rows)}\n"
    )
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    return report


if __name__ == '__main__':
    main()
