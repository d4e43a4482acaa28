"""scripts/gpu_check.sh on a machine whose Python lacks part of the OpenMMLab stack (the GPU image has no cv2 unless
its own): the backbone steps and mmcv's ops check still run, and the report names what the toy demo missed.
(Its full smoke run, the toy demo included, is tests/e2e/test_train_test.py's.)"""

import subprocess
import sys

import pytest
from helpers import REPO, SUBPROCESS_ENV

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]


def test_without_cv2_the_demo_is_skipped_naming_it_and_the_rest_runs(tmp_path):
    site = tmp_path / 'site'
    site.mkdir()
    (site / 'sitecustomize.py').write_text("import sys\nsys.modules['cv2'] = None  # as if not installed\n")
    env = {**SUBPROCESS_ENV, 'PYTHONPATH': f'{site}:{REPO}', 'PY': sys.executable, 'OUT': str(tmp_path / 'out')}
    res = subprocess.run(
        ['bash', 'scripts/gpu_check.sh', '--smoke'], cwd=REPO, env=env, capture_output=True, text=True, timeout=1800
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = (tmp_path / 'out' / 'gpu.md').read_text()
    assert '| PlainViT-global | 1 |' in report and '## mmcv ops on cpu' in report
    assert 'not importable with' in report and 'cv2' in report
    assert 'the toy demo is skipped' in res.stderr
