"""The import-time harness (mmrecvit/benchmark/imports.py): fresh interpreters, and what each statement imports.
No timing is asserted (benchmarks/import_time.md holds the figures)."""

import pytest

from mmrecvit.benchmark.imports import format_table, measure_imports


@pytest.mark.subprocess
def test_each_statement_runs_in_a_fresh_interpreter_and_names_the_modules_beyond_the_first():
    rows = measure_imports(['import json', 'import json, mmrecvit'], repeats=2)
    assert [len(r.seconds) for r in rows] == [2, 2] and all(s > 0 for r in rows for s in r.seconds)
    assert 'json' in rows[0].modules and 'mmrecvit' not in rows[0].modules  # nothing left from another run
    assert {'json', 'mmrecvit', 'timm', 'torch'} <= set(rows[1].modules)
    first, second = format_table(rows, shown=100).splitlines()[2:]
    assert first.endswith(f'| 1.000 | {len(rows[0].modules)} | – |')
    assert 'mmrecvit' in second.split('|')[-2] and 'json' not in second.split('|')[-2]


@pytest.mark.subprocess
def test_a_statement_that_fails_is_one_error_naming_it_and_why():
    with pytest.raises(RuntimeError, match=r"'import no_such_module' fails in a fresh interpreter: ModuleNotFound"):
        measure_imports(['import no_such_module'], repeats=1)
    with pytest.raises(ValueError, match='repeats must be at least 1'):
        measure_imports(['import json'], repeats=0)
