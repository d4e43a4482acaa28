"""Killed mid-run (issue 19): SIGKILL at several points, also inside a checkpoint save, then `--resume`:
the final weights equal the uninterrupted run's, bit for bit.

The toy UperNet with reViT of tests/test_reliability_resume.py (step dropout, drop path, random crops
and flips: the resume must restore the random streams too), 4 iterations with a checkpoint after each
one and `max_keep_ckpts=1` (the toy configs' setting: the case where mmengine's own `CheckpointHook`
loses everything, it deletes the old checkpoint before writing the new one), deterministic CPU. Each
run is a subprocess (tests/kill_train.py) that SIGKILLs itself at the chosen point; `--resume` then
picks `work_dir/last_checkpoint`, which `AtomicCheckpointHook` rewrites only after the checkpoint is
complete and renamed into place.

The control shows that the test sees the fault: with mmengine's `CheckpointHook`, a kill in the middle
of writing checkpoint 3 leaves `last_checkpoint` naming the deleted iter_2.pth and a half-written
iter_3.pth; the resume stops (with our one-line error naming the missing file).
"""
import os
import os.path as osp
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import REPO, toy_cfg_options
from test_reliability_resume import EXTRA, SEG, max_abs_diff

N = 4
KILL = osp.join(REPO, 'tests', 'kill_train.py')
FAULTS = ['iter:2', 'mid-write:1', 'mid-write:3', 'before-rename:2', 'after-rename:2', 'before-delete:3']


def run(fault, root, work, *args, config=SEG):
    options = [*toy_cfg_options('seg', root, work, iters=N), *EXTRA, 'default_hooks.checkpoint.interval=1',
               'default_hooks.checkpoint.max_keep_ckpts=1']
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONWARNINGS': 'ignore'}
    return subprocess.run([sys.executable, KILL, fault, '--', config, *args, *options], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def final_weights(work):
    return torch.load(work / f'iter_{N}.pth', map_location='cpu', weights_only=True)['state_dict']


@pytest.fixture(scope='module')
def uninterrupted(toy_root, tmp_path_factory):
    work = tmp_path_factory.mktemp('full')
    done = run('none', toy_root, work)
    assert done.returncode == 0, done.stderr[-3000:]
    return final_weights(work)


@pytest.mark.slow
@pytest.mark.parametrize('fault', FAULTS)
def test_killed_run_resumes_to_the_uninterrupted_weights(toy_root, tmp_path, uninterrupted, fault):
    work = tmp_path / 'work'
    killed = run(fault, toy_root, work)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr[-3000:])
    last = (work / 'last_checkpoint').read_text() if (work / 'last_checkpoint').exists() else None
    print(f'{fault}: killed; files {sorted(os.listdir(work))}; last_checkpoint -> {last}')
    if last is not None:  # it names a complete checkpoint
        torch.load(last, map_location='cpu', weights_only=True)
    resumed = run('none', toy_root, work, '--resume')
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not [f for f in os.listdir(work) if f.endswith('.tmp')]  # a killed save's temporary file is gone
    diff = max_abs_diff(uninterrupted, final_weights(work))
    print(f'{fault}: max |w_full - w_resumed| = {diff}')
    assert diff == 0.0


@pytest.mark.slow
def test_control_mmengine_checkpoint_hook_loses_the_run_when_killed_mid_save(toy_root, tmp_path):
    config = tmp_path / 'plain_hook.py'
    config.write_text(f"_base_ = '{SEG}'\ndefault_hooks = dict(checkpoint=dict(type='CheckpointHook'))\n")
    work = tmp_path / 'work'
    killed = run('mid-write:3', toy_root, work, config=str(config))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert (work / 'last_checkpoint').read_text() == str(work / 'iter_2.pth')
    assert sorted(f for f in os.listdir(work) if f.endswith('.pth')) == ['iter_3.pth']  # the half-written one
    resumed = run('none', toy_root, work, '--resume', config=str(config))
    assert resumed.returncode != 0
    assert f"cannot resume from '{work / 'iter_2.pth'}'" in resumed.stderr, resumed.stderr[-2000:]


# ---- 2 processes (gloo): one rank killed ----------------------------------------------------------
def run_two(fault, root, work, config, *args):
    from test_reliability_distributed import free_port

    options = [*toy_cfg_options('seg', root, work, iters=N, batch=1), 'default_hooks.checkpoint.interval=1']
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONWARNINGS': 'ignore', 'PYTHONPATH': REPO}
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node=2', f'--master_port={free_port()}',
           KILL, fault, '--', config, '--launcher', 'pytorch', *args, *options]
    start = time.monotonic()
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    return res, time.monotonic() - start


@pytest.mark.slow
def test_two_processes_one_rank_killed_fails_fast_naming_it_and_resumes_exactly(toy_root, tmp_path):
    """torchrun's elastic agent sees rank 1 die (SIGKILL at the start of iteration 3), stops rank 0 (blocked in
    DDP's gradient all-reduce) and exits non-zero with a report naming rank 1 and the signal: no hang."""
    from test_reliability_distributed import deterministic_seg_config

    config = deterministic_seg_config(tmp_path)
    full, _ = run_two('none', toy_root, tmp_path / 'full', config)
    assert full.returncode == 0, full.stderr[-3000:]
    killed, seconds = run_two('rank1/iter:2', toy_root, tmp_path / 'work', config)
    report = killed.stdout + killed.stderr
    print(f'one rank killed: torchrun exit {killed.returncode} after {seconds:.0f}s (whole run)')
    assert killed.returncode != 0
    assert 'rank      : 1' in report and 'Signal 9 (SIGKILL)' in report, report[-3000:]
    assert seconds < 300
    resumed, _ = run_two('none', toy_root, tmp_path / 'work', config, '--resume')
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    diff = max_abs_diff(final_weights(tmp_path / 'full'), final_weights(tmp_path / 'work'))
    print(f'2 processes, rank 1 killed at iteration 3, resumed: max |w_full - w_resumed| = {diff}')
    assert diff == 0.0
