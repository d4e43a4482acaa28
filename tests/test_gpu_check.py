"""scripts/gpu_check.sh --smoke: the GPU check's code, run on the CPU at a tiny size."""
import os
import subprocess

import pytest
from conftest import REPO


@pytest.mark.slow
def test_gpu_check_smoke_writes_its_report(tmp_path):
    res = subprocess.run(['bash', 'scripts/gpu_check.sh', '--smoke'], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "OUT": str(tmp_path)}, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    report = (tmp_path / 'gpu.md').read_text()
    for name in ('PlainViT', 'NaiveRecursiveViT', 'SRViT', 'ReViT', 'EdgeRecViT', 'MoRViT'):
        for variant in ('global', 'window', 'window-cp'):
            assert f'| {name}-{variant} | 1 |' in report
    assert '| seg | upernet_plainvit-ti' in report and '| det | mask-rcnn_plainvit-ti' in report
    assert 'one training step' in report
