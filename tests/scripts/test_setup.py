"""scripts/setup.sh picks mmcv's ops variant from the toolchain it finds (faked here) and refuses a
GPU machine whose mmcv has CPU-only ops."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import REPO

FAKE_PYTHON = """#!/usr/bin/env bash
# Answers setup.sh's probes: torch's CUDA build and GPUs, and the installed mmcv ops.
case "$2" in
  *get_compiling_cuda_version*) echo "$FAKE_INSTALLED" ;;
  *) echo "$FAKE_TORCH" ;;
esac
"""


pytestmark = pytest.mark.subprocess  # each test runs scripts/setup.sh (with a faked Python and toolchain)


@pytest.fixture
def fake_root(tmp_path):
    root = tmp_path / 'repo'
    (root / 'scripts').mkdir(parents=True)
    shutil.copy(Path(REPO) / 'scripts' / 'setup.sh', root / 'scripts' / 'setup.sh')
    python = root / '.venv' / 'bin' / 'python'
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    bin_dir = tmp_path / 'bin'  # nvcc lives here when a test wants one
    bin_dir.mkdir()
    return root, bin_dir


def run(fake_root, arg, torch_probe, installed='cpu', nvcc=True, **env):
    root, bin_dir = fake_root
    nvcc_path = bin_dir / 'nvcc'
    if nvcc:
        nvcc_path.write_text('#!/usr/bin/env bash\necho "Cuda compilation tools"\n')
        nvcc_path.chmod(0o755)
    elif nvcc_path.exists():
        nvcc_path.unlink()
    path = f'{bin_dir}:/usr/bin:/bin'  # no other nvcc (this machine has one in /usr/local/bin)
    full_env = {
        'PATH': path,
        'HOME': os.environ.get('HOME', '/tmp'),
        'FAKE_TORCH': torch_probe,
        'FAKE_INSTALLED': installed,
        **env,
    }
    return subprocess.run(
        ['bash', str(root / 'scripts' / 'setup.sh'), arg], capture_output=True, text=True, env=full_env, timeout=60
    )


@pytest.mark.parametrize(
    'probe, env, expected',
    [
        ('|0|', {}, 'cpu'),  # a CPU build of torch
        ('13.0|0|', {}, 'cpu'),  # a CUDA build, no GPU visible (this machine)
        ('13.0|1|90', {}, 'cu130-sm90'),  # one H100-class GPU
        ('12.1|2|80+86', {}, 'cu121-sm80+86'),  # two architectures
        ('13.0|0|', {'FORCE_CUDA': '1', 'TORCH_CUDA_ARCH_LIST': '8.0;9.0'}, 'cu130-sm80+90'),
    ],
)
def test_ops_variant(fake_root, probe, env, expected):
    res = run(fake_root, '--ops-variant', probe, **env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == expected


def test_a_visible_gpu_without_nvcc_is_an_error(fake_root):
    res = run(fake_root, '--ops-variant', '13.0|1|90', nvcc=False)
    assert res.returncode != 0 and 'nvcc is not on PATH' in res.stderr


def test_forced_cuda_needs_an_architecture(fake_root):
    res = run(fake_root, '--ops-variant', '13.0|0|', FORCE_CUDA='1')
    assert res.returncode != 0 and 'TORCH_CUDA_ARCH_LIST' in res.stderr


@pytest.mark.parametrize(
    'probe, installed, ok',
    [('13.0|1|90', 'cpu', False), ('13.0|1|90', 'cuda', True), ('13.0|0|', 'cpu', True), ('13.0|0|', 'cuda', False)],
)
def test_the_install_check_fails_loudly_on_the_wrong_ops(fake_root, probe, installed, ok):
    res = run(fake_root, '--check-ops', probe, installed=installed)
    assert (res.returncode == 0) == ok, res.stderr
    if not ok:
        assert f'installed mmcv has {installed} ops' in res.stderr


def test_d2_source_is_the_given_one_else_the_shared_tarball(fake_root, tmp_path):
    """`--d2-source` (what detectron2 is built from; tests/e2e/test_d2_tools.py runs its tools from it)."""
    root, _ = fake_root
    tarball = root.parent / 'shared' / 'vendor' / 'detectron2-02b5c4e2.tar.gz'
    tarball.parent.mkdir(parents=True)
    tarball.write_bytes(b'')
    assert Path(run(fake_root, '--d2-source', '|0|').stdout.strip()).resolve() == tarball.resolve()
    given = run(fake_root, '--d2-source', '|0|', MMRECVIT_D2_SOURCE=str(tmp_path / 'd2'))
    assert given.returncode == 0 and given.stdout.strip() == str(tmp_path / 'd2')
