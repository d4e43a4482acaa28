"""scripts/gpu_check.sh's CPU dry mode, --quick (issue 48.8): the report's structure, every check present, and every
case that should pass today passing; the cases known to fail until issue 48's other items land are
`gpu_check.KNOWN_FAILURES` (their item named in the report), timings never asserted. The exit status is 1 exactly
when a case fails. The report goes where --out says, refused inside the repository outside work_dirs/."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, SUBPROCESS_ENV

from mmrecvit.benchmark import gpu_check

SKIP_REASONS = ('needs CUDA', '--quick', 'oneDNN')  # what the CPU dry mode may leave out


@pytest.fixture(scope='module')
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp('gpu_check')
    env = {**SUBPROCESS_ENV, 'PY': sys.executable, 'PYTHONPATH': str(REPO)}
    res = subprocess.run(
        ['bash', 'scripts/gpu_check.sh', '--cpu', '--quick', '--out', str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    records = json.loads((out / 'cpu-quick.json').read_text())
    return res, records, (out / 'cpu-quick.md').read_text()


@pytest.mark.slow  # ~40 s: the whole tool, every check
@pytest.mark.subprocess
def test_quick_dry_mode_reports_every_check_and_the_expected_passes(quick_run):
    res, records, report = quick_run
    assert {r['check'] for r in records} == set(gpu_check.CHECKS), res.stderr[-3000:]
    failures = [r for r in records if r['status'] == 'FAIL']
    assert res.returncode == (1 if failures else 0), res.stdout[-3000:] + res.stderr[-3000:]
    unexpected = [f'{r["check"]}/{r["case"]}: {r["measured"]}' for r in failures if not r['known'] and not r['timing']]
    assert not unexpected, f'cases that should pass failed: {unexpected}'
    for r in records:
        assert r['status'] in ('PASS', 'FAIL', 'SKIP') and r['threshold']
        if r['status'] == 'SKIP':
            assert any(why in r['measured'] for why in SKIP_REASONS), r
    # the checks that must run in the dry mode did, on several models
    ran = {check: sum(r['check'] == check and r['status'] != 'SKIP' for r in records) for check in gpu_check.CHECKS}
    assert all(ran[c] >= 6 for c in ('parity', 'router_tf32', 'sync', 'attention')), ran
    assert all(ran[c] >= 1 for c in ('recipes', 'compile', 'ddp', 'fsdp', 'revit_dropout', 'mmcv_ops')), ran
    # the report: one table row per case, each known failure with its item
    assert report.startswith('# GPU check: CPU dry mode, quick')
    assert '| check | case | measured | threshold | status | known failure until |' in report
    rows = [line for line in report.splitlines() if line.startswith('| ') and not line.startswith('| check ')]
    assert len(rows) == len(records)
    for r in failures:
        assert f'| {r["case"]} |' in report and (not r['known'] or r['known'] in report)
    assert f'{len(failures)} FAIL' in report
    printed = [line for line in res.stdout.splitlines() if line.split(' ', 1)[0] in ('PASS', 'FAIL', 'SKIP')]
    assert len(printed) == len(records)  # each case printed with its figure and threshold
    assert all('(threshold ' in line for line in printed)


def test_known_failures_name_existing_checks_and_an_issue_item():
    for pattern, item in gpu_check.KNOWN_FAILURES.items():
        assert pattern.split('/', 1)[0] in gpu_check.CHECKS, pattern
        assert item.startswith('48.'), item


def test_the_report_stays_out_of_the_repository(tmp_path):
    repo = Path(REPO).resolve()
    assert gpu_check.out_dir(str(tmp_path)) == tmp_path.resolve()
    assert gpu_check.out_dir(str(repo / 'work_dirs' / 'gpu_check')) == repo / 'work_dirs' / 'gpu_check'
    if (repo / '.git').exists():
        with pytest.raises(SystemExit, match='inside the repository'):
            gpu_check.out_dir(str(repo / 'benchmarks'))


def test_unknown_checks_are_named(capsys):
    with pytest.raises(SystemExit):
        gpu_check.parse_args(['--only', 'sync,compil'])
    assert "unknown check 'compil'" in capsys.readouterr().err
