"""The GPU check's recipe and process checks (`gpu_check.py`): recipes, ddp, fsdp, dist_train, mmcv_ops."""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from .gpu_check_models import Case, amp, cases, images, input_size, model_case, train_loss
from .gpu_check_results import REPO, Result, Setup, guarded, skipped

METHODS = ('plainvit', 'naiverecvit', 'srvit', 'revit', 'edgerecvit', 'morvit')
DET = 'configs/det/mask-rcnn_{}-{}_vitdet-fpn_16xb4-amp-lsj-100e_coco.py'  # 4 images per GPU, rel-pos, with_cp, AMP
SEG = 'configs/seg/upernet_{}-{}_8xb2-amp-ld0.95-160k_ade20k-512x512.py'
TOY_DET = 'configs/det/mask-rcnn_{}-ti_fpn_1xb2-800it_toy-coco.py'
TOY_SEG = 'configs/seg/upernet_{}-ti_1xb4-150it_toy-ade20k-256x256.py'
MEMORY_GIB = 40.0  # a recipe's iteration, model and optimizer state included, fits an A100-40GB (and an L40S-48GB)


# ---- recipes ---------------------------------------------------------------------------------------------------------
def recipe_paths(setup: Setup) -> list[str]:
    """GPU: every method's ViTDet Mask R-CNN and UperNet recipe at S and B. CPU: the toy recipes (the real sizes'
    CPU dry runs are tools/analysis_tools/dry_run.py's, in docs/dry_run.md); --quick: PlainViT's toy Mask R-CNN."""
    if setup.cuda:
        return [path.format(m, size) for path in (DET, SEG) for size in ('s', 'b') for m in METHODS]
    if setup.quick:
        return [TOY_DET.format('plainvit')]
    return [path.format(m) for path in (TOY_DET, TOY_SEG) for m in METHODS]


def recipes(setup: Setup) -> Iterator[Result]:
    """One training iteration of each recipe at its real sizes, and a test iteration at S (benchmark/dry_run_mm.py:
    the recipe as written, random weights, synthetic data through its own pipeline; AMP on a GPU). On a GPU the peak
    of all its allocations (model and optimizer state included) must fit `MEMORY_GIB`. Its TFLOP/s (the FLOPs the
    iteration executed over its time) is what `tools/analysis_tools/dry_run.py --gpu-rate` asks for."""
    for path in recipe_paths(setup):
        yield from guarded('recipes', Path(path).stem, lambda path=path: [_recipe(path, setup)])


def _recipe(path: str, setup: Setup) -> Result:
    from .dry_run import DryRunOptions
    from .dry_run_mm import dry_run

    if setup.cuda:
        gc.collect()  # the previous recipe's runner
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(setup.device)
    batch = 1 if setup.quick else None  # None: the recipe's images per GPU
    test = not setup.quick and '-b_' not in path  # the test iteration at S (B runs the same code)
    result = dry_run(str(REPO / path), DryRunOptions(batch=batch, device=str(setup.device), repeats=1, test=test))
    seconds = statistics.median(result.train.seconds)
    measured = (
        f'{result.dtype}, batch {result.batch}, {seconds:.2f} s/iter ({result.batch / seconds:.1f} img/s, '
        f'{result.train.flops / seconds / 1e12:.3g} TFLOP/s executed)'
    )
    if not setup.cuda:
        return Result('recipes', Path(path).stem, measured, 'runs', True)
    peak = torch.cuda.max_memory_allocated(setup.device) / 2**30
    measured += f', peak {peak:.1f} GiB'
    return Result('recipes', Path(path).stem, measured, f'runs; peak <= {MEMORY_GIB:g} GiB', peak <= MEMORY_GIB)


# ---- ddp and fsdp ----------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def one_process_group(setup: Setup) -> Iterator[None]:
    """A 1-process group in this process: NCCL on a GPU, gloo on the CPU."""
    if setup.cuda:
        torch.cuda.set_device(setup.device)
    dist.init_process_group(
        'nccl' if setup.cuda else 'gloo', init_method=f'tcp://127.0.0.1:{free_port()}', rank=0, world_size=1
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def ddp_cases(setup: Setup) -> list[tuple[Case, dict]]:
    """The recipes' models, and out_indices that stop before the last layer (issue 48: DDP's "Expected to have
    finished reduction" at the second iteration, for PlainViT and Edge-RecViT)."""
    models = cases(setup, 'ddp')
    trap = [(case, dict(out_indices=(2, 5, 8))) for case in models if case.name in ('PlainViT', 'EdgeRecViT')]
    return [(case, {}) for case in models] + trap


def two_steps(wrapped: nn.Module, setup: Setup) -> str:
    """Two training steps (the second is where DDP finds a parameter that had no gradient); the losses."""
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=1e-4)
    x = images(*input_size(setup, 'ddp'), setup.device)
    losses = []
    for _ in range(2):
        with amp(setup):
            loss = train_loss(wrapped(x))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss))
    return f'2 steps, losses {losses[0]:.4g}, {losses[1]:.4g}'


def ddp(setup: Setup) -> Iterator[Result]:
    """A 1-process DistributedDataParallel training step, twice, with the recipes' find_unused_parameters=False."""
    with one_process_group(setup):
        for case, kwargs in ddp_cases(setup):
            name = case.name + ''.join(f' {k} {v}' for k, v in kwargs.items())
            yield from guarded('ddp', name, lambda c=case, k=kwargs, n=name: [_ddp(c, k, n, setup)], '2 steps')


def _ddp(case: Case, kwargs: dict, name: str, setup: Setup) -> Result:
    from torch.nn.parallel import DistributedDataParallel

    model = model_case(case, setup, **kwargs)
    ids = [setup.device.index or 0] if setup.cuda else None
    wrapped = DistributedDataParallel(model, device_ids=ids, find_unused_parameters=False)
    return Result('ddp', name, two_steps(wrapped, setup), '2 steps', True)


def fsdp(setup: Setup) -> Iterator[Result]:
    """A 1-process FSDP2 training step, twice: every unique block and the model `fully_shard`ed with bf16 parameters
    (fp32 reductions), the mixed precision under which the routers must still decide in fp32."""
    with one_process_group(setup):
        for case in cases(setup, 'fsdp'):
            yield from guarded('fsdp', case.name, lambda case=case: [_fsdp(case, setup)], '2 steps')


def _fsdp(case: Case, setup: Setup) -> Result:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    model = model_case(case, setup)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return Result('fsdp', case.name, two_steps(model, setup), '2 steps', True)


# ---- dist_train ------------------------------------------------------------------------------------------------------
def dist_train(setup: Setup) -> Iterator[Result]:
    """`bash tools/dist_train.sh` with 1 process trains the toy Mask R-CNN (PlainViT) for 2 iterations, evaluates it
    and saves iter_2.pth: NCCL on a GPU (with mmcv's ops on it), gloo on the CPU."""
    if setup.quick:
        yield skipped('dist_train', 'toy Mask R-CNN, 1 process', "--quick (tests/e2e's two-rank run covers it on CPU)")
        return
    yield from guarded('dist_train', 'toy Mask R-CNN, 1 process', lambda: [_dist_train(setup)], 'rc 0, iter_2.pth')


def _dist_train(setup: Setup) -> Result:
    data, work = setup.work / 'toy_data', setup.work / 'dist_train'
    make = [sys.executable, 'tools/misc/make_toy_data.py', '--out', str(data), '--which', 'coco', '--size', '128']
    subprocess.run([*make, '--coco-train', '4', '--coco-val', '2', '--no-progress'], cwd=REPO, check=True)
    root = f'{data}/toy_coco/'
    options = [
        'train_cfg.max_iters=2',
        'train_cfg.val_interval=2',
        'default_hooks.checkpoint.interval=2',
        *[
            f'{split}_dataloader.{key}'
            for split in ('train', 'val', 'test')
            for key in ('num_workers=0', 'persistent_workers=False')
        ],
        *[f'{split}_dataloader.dataset.data_root={root}' for split in ('train', 'val', 'test')],
        *[f'{split}_evaluator.ann_file={root}annotations/instances_val2017.json' for split in ('val', 'test')],
    ]
    env = {**os.environ, 'PYTHON': sys.executable, 'PORT': str(free_port())}
    command = [
        'bash',
        'tools/dist_train.sh',
        TOY_DET.format('plainvit'),
        '1',
        '--work-dir',
        str(work),
        '--cfg-options',
        *options,
    ]
    start = time.perf_counter()
    res = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    done = res.returncode == 0 and (work / 'iter_2.pth').is_file()
    tail = '' if done else ': ' + (res.stderr.strip().splitlines() or [''])[-1][:150]
    measured = (
        f'rc {res.returncode}, {time.perf_counter() - start:.0f} s, iter_2.pth {"written" if done else "missing"}{tail}'
    )
    return Result('dist_train', 'toy Mask R-CNN, 1 process', measured, 'rc 0, iter_2.pth', done)
