"""torch.compile per method (issue 48.3): dynamo's graphs at the first call, the recompiles over later calls on new
images of the same shape, and the first call's seconds (dynamo's tracing, with its eager backend), in training and in
eval, for the GPU check's cases (each method's ViTDet recipe backbone: with_cp, windows with rel-pos, drop path).

    python tools/analysis_tools/compile_graphs.py                  # --quick: width 32, 64x64 inputs, every case
    python tools/analysis_tools/compile_graphs.py --full           # the recipes' S (GPU: at 512, CPU: at 256)

The same measure as `python -m mmrecvit.benchmark.gpu_check --only compile` (which runs one case in --quick).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

from mmrecvit.benchmark.gpu_check_compile import compiled_case
from mmrecvit.benchmark.gpu_check_models import CASES
from mmrecvit.benchmark.gpu_check_results import Setup
from mmrecvit.inputs import tool_parser


def main(argv: list[str] | None = None) -> str:
    parser = tool_parser('tools/analysis_tools/compile_graphs.py', __doc__)
    parser.add_argument('--full', action='store_true', help="the recipes' sizes instead of --quick's")
    parser.add_argument('--cases', nargs='*', help=f'case names (default: all of {[c.name for c in CASES]})')
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases or ()) - {c.name for c in CASES})
    if unknown:
        parser.error(f'--cases {unknown}: allowed {[c.name for c in CASES]}')
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    lines = [f'torch {torch.__version__}, {device}, {"full" if args.full else "quick"} sizes', '']
    lines += ['| case | mode | measured | threshold | pass |', '|---|---|---|---|---|']
    with tempfile.TemporaryDirectory(prefix='compile_graphs_') as work:  # scratch space, removed after
        setup = Setup(device, not args.full, Path(work))
        for case in CASES:
            if args.cases and case.name not in args.cases:
                continue
            for mode in ('train', 'eval'):
                r = compiled_case(case, setup, mode)
                lines.append(f'| {case.name} | {mode} | {r.measured} | {r.threshold} | {r.passed} |')
                print(lines[-1], file=sys.stderr, flush=True)  # progress: a case takes seconds to minutes
    return '\n'.join(lines)


if __name__ == '__main__':
    print(main())
