"""The suite's temporary folders (setup.cfg): a green session leaves nothing behind, a failed one keeps the failed
test's folder and the shared ones.

A full run writes ~12 GB under pytest's base folder; with pytest's default retention (every folder, last 3 sessions)
a few runs filled this machine's disk and a CI run failed with `No space left on device`.
"""

import os
import sys

from helpers import REPO, SUBPROCESS_ENV, run

TESTS = """
import pytest

@pytest.fixture(scope='module')
def shared(tmp_path_factory):
    path = tmp_path_factory.mktemp('shared') / 'blob'
    path.write_bytes(bytes(1 << 20))
    return path

def test_writes(tmp_path, shared):
    (tmp_path / 'blob').write_bytes(bytes(1 << 20))

def test_fails_when_asked(tmp_path, shared):
    (tmp_path / 'kept').write_text('for a look')
    assert not {fail}
"""


def files_under(root) -> list[str]:
    return [
        os.path.join(d, f) for d, _, names in os.walk(root) for f in names if not os.path.islink(os.path.join(d, f))
    ]


def session(tmp_path, fail: bool):
    (tmp_path / 'test_disk.py').write_text(TESTS.format(fail=fail))
    (tmp_path / 'root').mkdir()
    env = {k: v for k, v in SUBPROCESS_ENV.items() if not k.startswith('PYTEST_')}  # not an xdist worker
    env |= {'PYTEST_DEBUG_TEMPROOT': str(tmp_path / 'root'), 'PYTHONPATH': f'{REPO}/tests'}
    cmd = [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-c', f'{REPO}/setup.cfg']
    return run([*cmd, '--rootdir', str(tmp_path), str(tmp_path / 'test_disk.py')], cwd=tmp_path, env=env)


def test_a_green_session_removes_its_temporary_folders(tmp_path):
    res = session(tmp_path, fail=False)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert files_under(tmp_path / 'root') == []


def test_a_failed_session_keeps_the_failed_tests_folder_only(tmp_path):
    res = session(tmp_path, fail=True)
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    kept = sorted(os.path.relpath(f, tmp_path / 'root').split(os.sep, 2)[-1] for f in files_under(tmp_path / 'root'))
    assert kept == ['shared0/blob', 'test_fails_when_asked0/kept'], kept
