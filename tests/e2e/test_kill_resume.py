"""Exact resume and killed runs (issues 9, 19): a run interrupted after K iterations, or SIGKILLed at any
point (also inside a checkpoint save, also on one of two ranks), then `--resume`d, ends with the weights of the
uninterrupted run, bit for bit.

* Interrupted + `--resume`: toy Mask R-CNN with Edge-RecViT (Gumbel-softmax noise, drop path; mmdet's RPN/RoI
  samplers draw random numbers too) and toy UperNet with reViT (step dropout, drop path; random resize, crop
  and flip in the data pipeline), on CPU with `randomness=dict(seed=0, deterministic=True)`: 2 iterations then
  `--resume` to 4, against 4 in one run that also validates after 2 (validation must not shift the training
  streams). `RNGStateHook` (in the recipes' `custom_hooks`) makes it so; the control resumes without it and
  must differ, which shows that the comparison sees the random streams. (Also measured while writing this:
  restoring the states before the loop's fast-forward over the trained batches, or letting the validation at
  K draw from the training streams, each break the equality: ~3e-4.)
* Killed: the same reViT UperNet, a checkpoint after each iteration and `max_keep_ckpts=1` (the toy configs'
  setting: the case where mmengine's own `CheckpointHook` loses everything, it deletes the old checkpoint
  before writing the new one). Each killed run is a process of its own that SIGKILLs itself at the chosen point,
  forked by one `tests/e2e/kill_train.py --serve` (one interpreter start and import for all of them); `--resume`
  then picks `work_dir/last_checkpoint`, which `AtomicCheckpointHook` rewrites only after the checkpoint is
  complete and renamed into place. The control: with mmengine's `CheckpointHook`,
  a kill in the middle of writing checkpoint 3 leaves `last_checkpoint` naming the deleted iter_2.pth and a
  half-written iter_3.pth; the resume stops (with our one-line error naming the missing file). A resumed run is
  compared with the uninterrupted one an iteration after its last complete checkpoint (or at the last, N).
The reViT runs are the toy at its smallest (`revit_seg_options` in tests/helpers.py: batch 1, 128 px crops).

The uninterrupted reViT run is the session's `revit_seg_reference`, the uninterrupted 2-rank run its
`two_rank_run` (tests/e2e/conftest.py).
"""

import json
import os
import os.path as osp
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import (
    DETERMINISTIC,
    REFERENCE_ITERS,
    REPO,
    REVIT_SEG,
    SUBPROCESS_ENV,
    free_port,
    max_abs_diff,
    revit_seg_options,
    run,
    toy_cfg_options,
    two_rank_options,
)
from mmengine.config import Config

sys.path.insert(0, osp.join(REPO, 'tools'))
import train as train_tool  # noqa: E402  (tools/train.py)

EDGE_DET = osp.join(REPO, 'configs/det/mask-rcnn_edgerecvit-ti_fpn_1xb2-800it_toy-coco.py')
K, N = 2, REFERENCE_ITERS
KILL = osp.join(REPO, 'tests', 'e2e', 'kill_train.py')
FAULTS = ['iter:2', 'mid-write:1', 'mid-write:3', 'before-rename:2', 'after-rename:2', 'before-delete:3']
NO_VALIDATION = [f'train_cfg.val_begin={N + 1}']  # a run compared only by its weights (the reference validates)
KILLED_OPTIONS = ['default_hooks.checkpoint.interval=1', 'default_hooks.checkpoint.max_keep_ckpts=1', *NO_VALIDATION]


def train(config, task, root, work, iters, *args, options=()):
    if task == 'seg':
        base = revit_seg_options(root, work, iters)
    else:
        base = [*toy_cfg_options(task, root, work, iters=iters), *DETERMINISTIC]
    train_tool.main([config, *args, *base, *options])
    return torch.load(work / f'iter_{iters}.pth', map_location='cpu', weights_only=True)


def weights(path):
    return torch.load(path, map_location='cpu', weights_only=True)['state_dict']


def tau_over(config, iters):
    """--cfg-options that end Edge-RecViT's tau schedule at `iters`: the schedule is a function of the iteration and
    of the run's length (max_iters), and the interrupted run stands for a run of N stopped at K, not a run of K."""
    hooks = Config.fromfile(config).custom_hooks
    index = next(i for i, hook in enumerate(hooks) if hook['type'] == 'TemperatureScheduleHook')
    return [f'custom_hooks.{index}.stop={iters}']


def write_config_without_rng_hook(config, tmp_path):
    """`config` with every custom hook but `RNGStateHook` (the temperature schedule stays: only the streams differ)."""
    hooks = [dict(hook) for hook in Config.fromfile(config).custom_hooks if hook['type'] != 'RNGStateHook']
    path = tmp_path / 'no_rng_hook.py'
    path.write_text(f"_base_ = '{config}'\ncustom_hooks = {hooks!r}\n")
    return str(path)


# ---- interrupted, then --resume -----------------------------------------------------------------------
@pytest.mark.usefixtures('deterministic_torch')
def test_interrupted_and_resumed_det_run_is_bit_identical_and_not_without_the_rng_hook(toy_root, tmp_path):
    # The uninterrupted run also validates at K: validation must not shift the training random streams.
    tau = tau_over(EDGE_DET, N)
    full = train(EDGE_DET, 'det', toy_root, tmp_path / 'full', N, options=[f'train_cfg.val_interval={K}', *tau])
    interrupted = train(EDGE_DET, 'det', toy_root, tmp_path / 'resumed', K, options=[*tau, *NO_VALIDATION])
    assert interrupted['rng_states']['world_size'] == 1
    shutil.copytree(tmp_path / 'resumed', tmp_path / 'control')
    (tmp_path / 'control' / 'last_checkpoint').write_text(str(tmp_path / 'control' / f'iter_{K}.pth'))
    resumed = train(EDGE_DET, 'det', toy_root, tmp_path / 'resumed', N, '--resume', options=[*tau, *NO_VALIDATION])
    assert resumed['meta']['iter'] == N
    for k, v in full['state_dict'].items():
        assert torch.equal(v, resumed['state_dict'][k]), k
    # the control: the same resume without the hook is not exact
    no_hook_config = write_config_without_rng_hook(EDGE_DET, tmp_path)
    no_hook = train(
        no_hook_config,
        'det',
        toy_root,
        tmp_path / 'control',
        N,
        '--resume',
        options=[*tau_over(no_hook_config, N), *NO_VALIDATION],
    )
    control_diff = max_abs_diff(full['state_dict'], no_hook['state_dict'])
    print(f'det without RNGStateHook: max |w_full - w_resumed| = {control_diff}')
    assert control_diff > 0


@pytest.mark.usefixtures('deterministic_torch')
def test_interrupted_and_resumed_seg_run_is_bit_identical(revit_seg_reference, toy_root, tmp_path):
    interrupted = train(REVIT_SEG, 'seg', toy_root, tmp_path, K)
    assert interrupted['rng_states']['world_size'] == 1
    resumed = train(REVIT_SEG, 'seg', toy_root, tmp_path, N, '--resume')
    assert resumed['meta']['iter'] == N
    full = weights(revit_seg_reference / f'iter_{N}.pth')
    for k, v in full.items():
        assert torch.equal(v, resumed['state_dict'][k]), k


# ---- killed ----------------------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def kill_server():
    """tests/e2e/kill_train.py --serve: one interpreter (imports, the toy built once) that forks each killed run."""
    server = subprocess.Popen(
        [sys.executable, KILL, '--serve', REVIT_SEG],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=SUBPROCESS_ENV,
    )
    assert server.stdout.readline() == 'ready\n', 'kill_train.py --serve did not start'
    yield server
    server.stdin.close()
    assert server.wait(timeout=60) == 0


def run_killed(server, fault, root, work, *args, config=REVIT_SEG):
    """tools/train.py in a forked process of `server` that SIGKILLs itself at `fault`: its returncode and output."""
    work.mkdir(parents=True, exist_ok=True)
    log = work.parent / f'{work.name}.log'
    argv = [config, *args, *revit_seg_options(root, work, N), *KILLED_OPTIONS]
    server.stdin.write(json.dumps([fault, str(log), argv]) + '\n')
    server.stdin.flush()
    status = server.stdout.readline()
    assert status, f'kill_train.py --serve stopped: {log.read_text()[-3000:]}'
    return int(status), log.read_text()


def resume_in_process(root, work, iters=N, config=REVIT_SEG):
    return train_tool.main([config, '--resume', *revit_seg_options(root, work, iters), *KILLED_OPTIONS])


@pytest.mark.subprocess
@pytest.mark.usefixtures('deterministic_torch')
@pytest.mark.parametrize('fault', FAULTS)
def test_killed_run_resumes_to_the_uninterrupted_weights(kill_server, revit_seg_reference, toy_root, tmp_path, fault):
    work = tmp_path / 'work'
    status, output = run_killed(kill_server, fault, toy_root, work)
    assert status == -signal.SIGKILL, (status, output[-3000:])
    last = (work / 'last_checkpoint').read_text() if (work / 'last_checkpoint').exists() else None
    print(f'{fault}: killed; files {sorted(os.listdir(work))}; last_checkpoint -> {last}')
    restored = 0
    if last is not None:  # it names a complete checkpoint
        restored = torch.load(last, map_location='cpu', weights_only=True)['meta']['iter']
    # One iteration past the last complete checkpoint is compared (the last one, N, as it is): what resuming restores
    # (weights, optimizer, schedulers, random streams, data position) shows in the next step.
    stop = min(restored + 1, N)
    # The resume need not be a fresh process: the killed one was.
    assert resume_in_process(toy_root, work, iters=stop).iter == stop
    assert not [f for f in os.listdir(work) if f.endswith('.tmp')]  # a killed save's temporary file is gone
    diff = max_abs_diff(weights(revit_seg_reference / f'iter_{stop}.pth'), weights(work / f'iter_{stop}.pth'))
    print(f'{fault}: resumed from iteration {restored} to {stop}: max |w_full - w_resumed| = {diff}')
    assert diff == 0.0


@pytest.mark.subprocess
@pytest.mark.usefixtures('deterministic_torch')
def test_control_mmengine_checkpoint_hook_loses_the_run_when_killed_mid_save(kill_server, toy_root, tmp_path, capsys):
    config = tmp_path / 'plain_hook.py'
    config.write_text(f"_base_ = '{REVIT_SEG}'\ndefault_hooks = dict(checkpoint=dict(type='CheckpointHook'))\n")
    work = tmp_path / 'work'
    status, output = run_killed(kill_server, 'mid-write:3', toy_root, work, config=str(config))
    assert status == -signal.SIGKILL, output[-3000:]
    assert (work / 'last_checkpoint').read_text() == str(work / 'iter_2.pth')
    assert sorted(f for f in os.listdir(work) if f.endswith('.pth')) == ['iter_3.pth']  # the half-written one
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        resume_in_process(toy_root, work, config=str(config))
    assert info.value.code == 2
    assert f"train.py: error: cannot resume from '{work / 'iter_2.pth'}'" in capsys.readouterr().err


# ---- 2 processes (gloo): one rank killed -----------------------------------------------------------------
def run_two(fault, root, work, config, *args):
    """torchrun with 2 ranks of tests/e2e/kill_train.py (the shared run's options); its result and seconds."""
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONWARNINGS': 'ignore', 'PYTHONPATH': REPO}
    cmd = [
        sys.executable,
        '-m',
        'torch.distributed.run',
        '--nproc_per_node=2',
        f'--master_port={free_port()}',
        KILL,
        fault,
        '--',
        config,
        '--launcher',
        'pytorch',
        *args,
        *two_rank_options(root, work),
    ]
    start = time.monotonic()
    res = run(cmd, env=env)
    return res, time.monotonic() - start


@pytest.mark.slow  # ~90 s: two more torchrun runs of two ranks each (the full run is the session's)
@pytest.mark.dist
@pytest.mark.subprocess
def test_two_processes_one_rank_killed_fails_fast_naming_it_and_resumes_exactly(two_rank_run, toy_root, tmp_path):
    """torchrun's elastic agent sees rank 1 die (SIGKILL at the start of iteration 3), stops rank 0 (blocked in
    DDP's gradient all-reduce) and exits non-zero with a report naming rank 1 and the signal: no hang."""
    config = two_rank_run['config']
    killed, seconds = run_two('rank1/iter:2', toy_root, tmp_path / 'work', config)
    report = killed.stdout + killed.stderr
    print(f'one rank killed: torchrun exit {killed.returncode} after {seconds:.0f}s (whole run)')
    assert killed.returncode != 0
    assert 'rank      : 1' in report and 'Signal 9 (SIGKILL)' in report, report[-3000:]
    assert seconds < 300
    resumed, _ = run_two('none', toy_root, tmp_path / 'work', config, '--resume')
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    full = weights(Path(two_rank_run['work']) / f'iter_{N}.pth')
    diff = max_abs_diff(full, weights(tmp_path / 'work' / f'iter_{N}.pth'))
    print(f'2 processes, rank 1 killed at iteration 3, resumed: max |w_full - w_resumed| = {diff}')
    assert diff == 0.0
