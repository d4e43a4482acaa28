"""The suite's tiers and CI: `make test` (the README's test command, before each commit) runs the suite but its
`slow` tier, `make test TIER=slow` that tier, and CI (.ci/run) runs `make test TIER=all`, every test, and fails when
it fails: whatever the markers of a test, exactly one of the two tiers runs it, and CI runs it."""

import itertools
import re
import subprocess
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression  # pytest's own `-m` grammar (what `pytest -m EXPR` evaluates)
from helpers import REPO

ROOT = Path(REPO)
MAKEFILE = (ROOT / 'Makefile').read_text()


def selection(tier: str) -> str:
    """The `-m` expression `make test TIER=<tier>` passes to pytest (empty: every test)."""
    assert re.search(r'^test:.*\n\t\$\(PYTEST\) \$\(SELECT_\$\(TIER\)\) ', MAKEFILE, re.M), 'make test: no $(SELECT_..)'
    found = re.search(rf'^SELECT_{tier}\s*:=(.*)$', MAKEFILE, re.M)
    assert found, f'Makefile has no tier {tier!r}'
    expr = re.fullmatch(r'\s*(?:-m (?:"([^"]+)"|(\S+)))?\s*', found.group(1))
    assert expr, f'SELECT_{tier} is not a -m selection: {found.group(1)!r}'
    return expr.group(1) or expr.group(2) or ''


def runs(expr: Expression | None, marks: tuple[str, ...]) -> bool:
    return expr is None or expr.evaluate(set(marks).__contains__)


def test_every_test_is_in_exactly_one_tier_and_in_ci(pytestconfig):
    assert re.search(r'^TIER\s*\?=\s*commit$', MAKEFILE, re.M), 'make test without TIER is not the commit tier'
    tiers = {t: selection(t) for t in ('commit', 'slow', 'all')}
    assert tiers == {'commit': 'not slow', 'slow': 'slow', 'all': ''}  # as the docs say
    # every marker pytest registers (setup.cfg's, pytest's and its plugins'): 15 names, 2**15 combinations, so each
    # selection is compiled once (compiled per combination, this test took 154 s of the suite)
    names = [re.split(r'[(:]', line)[0] for line in pytestconfig.getini('markers')]
    assert {'slow', 'e2e', 'dist', 'subprocess'} <= set(names), names
    compiled = {t: Expression.compile(expr) if expr else None for t, expr in tiers.items()}
    for n in range(len(names) + 1):
        for marks in itertools.combinations(names, n):
            running = [t for t in ('commit', 'slow') if runs(compiled[t], marks)]
            assert len(running) == 1 and runs(compiled['all'], marks), (
                f'a test marked {marks} runs in {running or "none"}'
            )


@pytest.mark.subprocess
def test_an_unknown_tier_is_refused_naming_the_allowed_ones():
    res = subprocess.run(['make', '-n', 'test', 'TIER=slw'], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode != 0 and 'TIER=slw: allowed commit, slow, all' in res.stderr, res.stderr


def test_ci_runs_every_test_and_fails_when_one_fails():
    script = (ROOT / '.ci' / 'run').read_text()
    run = re.search(r'^make test TIER=all \|\| (\w+)=\$\?$', script, re.M)
    assert run, '.ci/run does not run `make test TIER=all`'
    last = script.strip().splitlines()[-1]
    assert f'${run.group(1)} == 0' in last, f'.ci/run ends with {last!r}: a failed test would not fail it'
