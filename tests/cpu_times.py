"""Where the suite's time goes: each test's wall time and CPU time, its own process's and its finished child
processes' together (`resource.getrusage`: a subprocess counts once it is waited for, a fork server when it exits).

    MMRECVIT_CPU_TIMES=/tmp/times make test TIER=all   # or any pytest command: one JSON line per test and worker
    python tests/cpu_times.py /tmp/times               # each worker's span, wall and CPU; the files by wall time

A worker whose CPU is near its wall time is busy; one whose wall time is well above waits (on a lock, a sleep, a
child it has not reaped yet). tests/conftest.py turns the hook on only when the variable is set.
"""

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """One line per test (its fixtures' set-up and teardown included) in `$MMRECVIT_CPU_TIMES/<worker>.jsonl`."""
    start, cpu = time.time(), _cpu_seconds()
    yield
    folder = Path(os.environ['MMRECVIT_CPU_TIMES'])
    folder.mkdir(parents=True, exist_ok=True)
    row = dict(test=item.nodeid, start=start, wall=time.time() - start, cpu=_cpu_seconds() - cpu)
    with open(folder / f'{os.environ.get("PYTEST_XDIST_WORKER", "main")}.jsonl', 'a') as f:
        f.write(json.dumps(row) + '\n')


def summary(folder: str, files: int = 25) -> str:
    rows = {p.stem: [json.loads(line) for line in p.open()] for p in sorted(Path(folder).glob('*.jsonl'))}
    if not rows:
        raise SystemExit(f'{folder}: no <worker>.jsonl files (run pytest with MMRECVIT_CPU_TIMES={folder})')
    lines = ['worker  span s  wall s  cpu s  tests']
    for worker, tests in rows.items():
        span = max(t['start'] + t['wall'] for t in tests) - min(t['start'] for t in tests)
        wall, cpu = sum(t['wall'] for t in tests), sum(t['cpu'] for t in tests)
        lines.append(f'{worker:6s} {span:7.0f} {wall:7.0f} {cpu:6.0f}  {len(tests)}')
    by_file = collections.defaultdict(lambda: [0.0, 0.0])
    for tests in rows.values():
        for t in tests:
            by_file[t['test'].split('::')[0]][0] += t['wall']
            by_file[t['test'].split('::')[0]][1] += t['cpu']
    lines.append(f'\nthe {files} files of most wall time: wall s, cpu s')
    for name, (wall, cpu) in sorted(by_file.items(), key=lambda kv: -kv[1][0])[:files]:
        lines.append(f'{wall:7.0f} {cpu:6.0f}  {name}')
    return '\n'.join(lines)


if __name__ == '__main__':
    print(summary(sys.argv[1]))
