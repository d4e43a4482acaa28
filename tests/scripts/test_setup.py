"""scripts/setup.sh: mmcv-lite by default (torchvision's kernels: no nvcc on a GPU machine), or with `--mmcv full`
compiled mmcv of the ops variant of the toolchain it finds (faked here); a GPU machine whose compiled mmcv has
CPU-only ops is refused, naming the fix."""

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers import REPO

FAKE_PYTHON = """#!/usr/bin/env bash
# Answers setup.sh's probes: the installed mmcv distribution, the lite ops check (the devices they ran on), the
# installed compiled ops, and torch's CUDA build and GPUs.
case "$2" in
  *importlib.metadata*) echo "$FAKE_MMCV" ;;
  *'assert backend()'*) echo "$FAKE_LITE_DEVICES" ;;
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


def run(fake_root, arg, torch_probe, installed='cpu', nvcc=True, mmcv='full', **env):
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
        'FAKE_MMCV': mmcv,
        'FAKE_LITE_DEVICES': 'cpu cuda' if '|1|' in torch_probe else 'cpu',
        **env,
    }
    args = arg if isinstance(arg, list) else [arg]
    return subprocess.run(
        ['bash', str(root / 'scripts' / 'setup.sh'), *args], capture_output=True, text=True, env=full_env, timeout=60
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


def test_compiled_ops_on_a_visible_gpu_without_nvcc_are_an_error_naming_the_default(fake_root):
    res = run(fake_root, '--ops-variant', '13.0|1|90', nvcc=False)
    assert res.returncode != 0 and 'nvcc is not on PATH' in res.stderr and 'make setup MMCV=lite' in res.stderr


def test_mmcv_lite_on_a_gpu_machine_needs_no_nvcc(fake_root):
    """The default: the check runs the torchvision table on every device (faked: the devices it reports)."""
    res = run(fake_root, '--check-ops', '13.0|1|90', nvcc=False, mmcv='lite')
    assert res.returncode == 0, res.stderr
    assert 'torchvision' in res.stdout and 'run on: cpu cuda' in res.stdout


@pytest.mark.parametrize('args', [['--mmcv', 'compiled'], ['--mmcv=fast'], ['--mmcv']])
def test_a_bad_mmcv_choice_is_one_error_naming_the_choices(fake_root, args):
    res = run(fake_root, args, '|0|')
    assert res.returncode != 0
    (line,) = res.stderr.strip().splitlines()
    assert '--mmcv' in line and 'lite' in line and 'full' in line


def test_an_unknown_option_is_refused_naming_the_options(fake_root):
    res = run(fake_root, '--fast', '|0|')
    assert res.returncode != 0 and "unknown option '--fast'" in res.stderr and '--mmcv lite|full' in res.stderr


def test_both_mmcv_distributions_installed_is_an_error(fake_root):
    res = run(fake_root, '--check-ops', '|0|', mmcv='both')
    assert res.returncode != 0 and 'both mmcv and mmcv-lite' in res.stderr and 'MMCV=lite' in res.stderr


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
        assert f'installed (compiled) mmcv has {installed} ops' in res.stderr
        assert 'make setup MMCV=lite' in res.stderr  # the fix: torchvision's kernels, CPU and CUDA


def test_d2_source_is_the_given_one_else_the_shared_tarball(fake_root, tmp_path):
    """`--d2-source` (what detectron2 is built from; tests/e2e/test_d2_tools.py runs its tools from it)."""
    root, _ = fake_root
    tarball = root.parent / 'shared' / 'vendor' / 'detectron2-02b5c4e2.tar.gz'
    tarball.parent.mkdir(parents=True)
    tarball.write_bytes(b'')
    assert Path(run(fake_root, '--d2-source', '|0|').stdout.strip()).resolve() == tarball.resolve()
    given = run(fake_root, '--d2-source', '|0|', MMRECVIT_D2_SOURCE=str(tmp_path / 'd2'))
    assert given.returncode == 0 and given.stdout.strip() == str(tmp_path / 'd2')


def test_too_little_disk_for_torch_is_one_error_before_pip(fake_root):
    """A new venv on a disk with 2 GB free (a faked df) stops before pip, naming the space it needs."""
    root, bin_dir = fake_root
    shutil.copy(Path(REPO) / 'requirements.txt', root / 'requirements.txt')
    df = bin_dir / 'df'
    df.write_text(
        '#!/usr/bin/env bash\necho "Filesystem 1024-blocks Used Available Capacity Mounted on"\n'
        'echo "/dev/vda 264241152 261000000 2097152 99% /"\n'
    )
    df.chmod(0o755)
    res = run(fake_root, [], '|0|', mmcv='')
    assert res.returncode != 0
    (line,) = res.stderr.strip().splitlines()
    assert 'only 2 GB free' in line and 'needs about 7 GB' in line and 'installing' not in res.stdout


def test_the_venv_it_made_holds_the_bytecode_of_every_module():
    """Step 8: every module of the venv's site-packages has its .pyc (but files that are not this Python's), whatever
    PYTHONDONTWRITEBYTECODE says: where it is set, Python writes none at import, and pip installs with --no-compile,
    so each new interpreter compiled the stack's sources again."""
    venv = Path(REPO) / '.venv'
    if Path(sys.prefix).resolve() != venv.resolve() or not (venv / '.mmrecvit-setup').exists():
        pytest.skip("checks the venv scripts/setup.sh made, from inside it (make test's)")
    site = Path(sysconfig.get_paths()['purelib'])
    missing = [p for p in site.rglob('*.py') if not Path(importlib.util.cache_from_source(p)).exists()]
    not_python = []
    for path in missing:
        try:
            compile(path.read_bytes(), str(path), 'exec')
        except (SyntaxError, ValueError):
            not_python.append(path)
    without = sorted(set(missing) - set(not_python))
    assert not without, (
        f'{len(without)} modules without bytecode, e.g. {[str(p.relative_to(site)) for p in without[:3]]}'
    )
