"""The suite's two tiers and CI: `make test` (the README's test command, before each commit) runs the suite but its
`slow` tier, `make test-slow` that tier, and .ci/run runs both and fails when either fails: whatever the markers of a
test, exactly one tier runs it, so every test runs in CI."""

import configparser
import itertools
import re
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression  # pytest's own `-m` grammar (what `pytest -m EXPR` evaluates)
from helpers import REPO

ROOT = Path(REPO)


def make_selection(target: str) -> str:
    """The `-m` expression of the pytest command in the Makefile's `target` (empty: every test)."""
    recipe = re.search(rf'^{re.escape(target)}:.*\n((?:\t.*\n)+)', (ROOT / 'Makefile').read_text(), re.M)
    assert recipe, f'Makefile has no target {target!r}'
    (command,) = [line for line in recipe.group(1).splitlines() if '$(PYTEST)' in line]
    found = re.search(r' -m (?:"([^"]+)"|(\S+))', command)
    return (found.group(1) or found.group(2)) if found else ''


def markers() -> list[str]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / 'setup.cfg')
    return [line.split(':')[0].strip() for line in cfg['tool:pytest']['markers'].strip().splitlines()]


def test_every_test_runs_in_exactly_one_of_the_two_tiers():
    tiers = {t: make_selection(t) for t in ('test', 'test-slow')}
    assert tiers == {'test': 'not slow', 'test-slow': 'slow'}, tiers  # what README and docs/development.md say
    names = markers()
    assert {'slow', 'e2e', 'dist', 'subprocess'} <= set(names), names
    compiled = {t: Expression.compile(e) for t, e in tiers.items()}
    for n in range(len(names) + 1):
        for marks in itertools.combinations(names, n):
            running = [t for t, e in compiled.items() if e.evaluate(set(marks).__contains__)]
            assert len(running) == 1, f'a test marked {marks} runs in {running or "no tier"}'


@pytest.mark.parametrize('target', ['test', 'test-slow'])
def test_ci_runs_each_tier_and_fails_when_it_fails(target):
    script = (ROOT / '.ci' / 'run').read_text()
    run = re.search(rf'^make {re.escape(target)} \|\| (\w+)=\$\?$', script, re.M)
    assert run, f'.ci/run does not run `make {target}`'
    last = script.strip().splitlines()[-1]
    assert f'${run.group(1)} == 0' in last, f'.ci/run ends with {last!r}: `make {target}` failing would not fail it'
