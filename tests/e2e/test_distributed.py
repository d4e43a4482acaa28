"""Distributed training (issue 9): DDP == one process with the same global batch; every backbone trains under DDP.

Why equality can hold (and where it cannot): DDP averages the ranks' gradients, so 2 ranks x B/2
images equal 1 process x B images when every loss is a mean over images with the same
normaliser on every rank and nothing couples the images of a batch:
* heads: the toy UperNet uses GroupNorm (per image; BatchNorm would see B/2 images per rank) and
  mmseg's cross-entropy is a mean over all pixels of equally sized images;
* data: a deterministic pipeline (no random resize/crop/flip, whose draws differ between one
  process and two), `DefaultSampler` with the same seed gives rank r the images r, r+2, ... of the
  one-process order, so the ranks' batches together are the one-process batch; the heads' dropout
  (mmseg's default 0.1) is off for the same reason;
* backbones: PlainViT, NaiveRecursiveViT, SR-ViT (no aux loss), MoR-ViT expert-choice (top-k per
  image; its BCE is a mean over images with equal counts) and reViT without step dropout (its gates
  do not depend on the input, so its aux losses are the same on every rank) are deterministic and
  decompose over images: compared within 1e-5 after a few AdamW steps.
* not comparable, documented: Edge-RecViT (Gumbel noise; and its DU loss, like MoR-ViT
  token-choice's balance loss, is a product of two batch means, computed per rank as any DDP
  mixture-of-experts loss), reViT with step dropout and drop path in general draw random numbers:
  with mmengine's default `randomness.diff_rank_seed=False` every rank is seeded alike and draws the
  same sequence for its own images (correlated noise across ranks, not the one-process draws);
  `diff_rank_seed=True` decorrelates them. Mask R-CNN is not comparable either: its RPN/RoI
  samplers draw per rank and its losses are normalised by per-batch sample counts.
Every backbone (and the routing variants) trains 2 iterations under DDP with
`find_unused_parameters=False`: every parameter is in every iteration's graph (Edge-RecViT's masked
training path runs all steps, MoR-ViT always routes CLS through every recursion, reViT merges all
experts), so the shipped configs keep DDP's cheaper default (tests/configs/test_recipes.py checks every
shipped config's backbone for it); `out_indices` that stop before the last layer included, every method (the model
is pruned at build, issue 48.4). The variants not compared with one process seed each rank its own
(`diff_rank_seed=True`): reViT's ranks drop different steps.

The bare backbones run under `torch.multiprocessing` + gloo; through the tools, the session's `two_rank_run`
(`tools/dist_train.sh` with 2 processes, toy UperNet + MoR-ViT) is compared with `tools/train.py` in one.
"""

import os.path as osp
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from backbone_cases import BACKBONE_CASES
from ddp_workers import FSDP_VARIANTS, VARIANTS, _ddp_worker, _fsdp_worker, _warn_worker, train_backbone
from helpers import REFERENCE_ITERS, REPO, free_port, max_abs_diff, toy_cfg_options

from mmrecvit.models import BACKBONES

sys.path.insert(0, osp.join(REPO, 'tools'))
import train as train_tool  # noqa: E402  (tools/train.py)

pytestmark = pytest.mark.dist

TOLERANCE = 1e-5


def start_ranks(worker, *args, join=True):
    """Two gloo ranks of `worker(rank, 2, port, *args)`, forked from this process: they start from its imports (a
    spawned rank imports torch, timm and mmrecvit again, ~10 s of CPU each). Nothing they use needs a fresh process
    on the CPU (no CUDA context); the launch tools' own ranks are tested through tools/dist_train.sh below."""
    return mp.start_processes(worker, args=(2, free_port(), *args), nprocs=2, join=join, start_method='fork')


@pytest.fixture(scope='module')
def ddp_results(tmp_path_factory):
    out = tmp_path_factory.mktemp('ddp')
    start_ranks(_ddp_worker, str(out))
    return [torch.load(out / f'rank{r}.pth', weights_only=True) for r in range(2)]


@pytest.mark.parametrize('variant, name, kwargs, comparable', VARIANTS, ids=[v[0] for v in VARIANTS])
def test_every_backbone_trains_under_ddp(ddp_results, variant, name, kwargs, comparable, deterministic_torch):
    rank0, rank1 = (r[variant] for r in ddp_results)
    assert not isinstance(rank0, str), f'{variant} under DDP: {rank0}'
    assert max_abs_diff(rank0, rank1) == 0.0  # DDP keeps the replicas identical
    torch.manual_seed(0)
    initial = BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs}).state_dict()
    assert all(torch.isfinite(v).all() for v in rank0.values())
    assert max_abs_diff(rank0, initial) > 0
    if comparable:
        diff = max_abs_diff(rank0, train_backbone(variant))
        print(f'{variant}: max |w_ddp2 - w_1proc| = {diff:.2e}')
        assert diff <= TOLERANCE


@pytest.fixture(scope='module')
def fsdp_results(tmp_path_factory):
    out = tmp_path_factory.mktemp('fsdp')
    start_ranks(_fsdp_worker, str(out))
    return [torch.load(out / f'fsdp{r}.pth', weights_only=True) for r in range(2)]


@pytest.mark.parametrize('variant', FSDP_VARIANTS)
def test_every_method_trains_under_fsdp2_per_block_as_one_process(fsdp_results, variant):
    """Issue 48.5: FSDP2 with every unique block and the model `fully_shard`ed, 2 gloo ranks on the CPU (gloo has
    the all-gather and reduce-scatter FSDP2 needs): the gathered weights after 2 SGD steps are the unwrapped
    model's (both ranks see the same images and draws); reViT merges its experts and reads its diversity loss in
    forwards of the block's unit (`experts.ExpertBlock`)."""
    for rank in fsdp_results:
        assert not isinstance(rank[variant], str), f'{variant} under FSDP2: {rank[variant]}'
        diff, moved = rank[variant]
        print(f'{variant}: max |w_fsdp2 - w_1proc| = {diff:.2e} (moved {moved:.2e})')
        assert diff <= 1e-6 and moved > 1e-3


def test_shared_blocks_kept_gathered_through_the_forward_gather_no_more_in_backward(fsdp_results):
    """docs/multi_node.md, "FSDP2": a block `fully_shard`ed with `reshard_after_forward=False` stays gathered from
    its forward to its backward, so a step's backward gathers nothing again; the counts are printed (`all_gathers`)."""
    counts = fsdp_results[0]
    for name in ('PlainViT', 'SRViT', 'ReViT'):
        resharded, kept = counts[f'all-gathers {name} True'], counts[f'all-gathers {name} False']
        print(f'{name}: {resharded} all-gathers per training step, {kept} with reshard_after_forward=False')
        assert kept < resharded


def test_warn_mode_on_one_rank_keeps_ddp_in_step(tmp_path):
    """A rank whose router output is skipped (nonfinite='warn') still gives DDP a gradient for every
    router parameter (a zero), so neither rank fails nor hangs; bounded by a timeout."""
    context = start_ranks(_warn_worker, str(tmp_path), join=False)
    deadline = time.monotonic() + 120
    while not context.join(timeout=5):
        if time.monotonic() > deadline:
            for p in context.processes:
                p.terminate()
            pytest.fail('DDP hung: a rank in nonfinite="warn" dropped parameters from the graph')
    rank0 = torch.load(tmp_path / 'warn0.pth', weights_only=True)
    assert all(torch.isfinite(v).all() for v in rank0.values())  # rank 1's skipped router gave zero gradients


# ---- through the tools ---------------------------------------------------------------------------------
@pytest.mark.subprocess
def test_dist_train_launches_two_gloo_ranks(two_rank_run):
    """tools/dist_train.sh with 2 processes (gloo on CPU) really trains distributed and saves every rank's streams."""
    assert 'Distributed training is not used' not in two_rank_run['output']
    last = torch.load(Path(two_rank_run['work']) / f'iter_{REFERENCE_ITERS}.pth', map_location='cpu', weights_only=True)
    assert last['rng_states']['world_size'] == 2 and len(last['rng_states']['ranks']) == 2


@pytest.mark.subprocess
def test_dist_train_with_two_processes_equals_one_process(two_rank_run, toy_root, tmp_path, deterministic_torch):
    """2 ranks x batch 1 (the shared run) == 1 process x batch 2, after 4 AdamW steps (module docstring)."""
    train_tool.main(
        [two_rank_run['config'], *toy_cfg_options('seg', toy_root, tmp_path, iters=REFERENCE_ITERS, batch=2)]
    )
    one, two = (
        torch.load(Path(d) / f'iter_{REFERENCE_ITERS}.pth', map_location='cpu', weights_only=True)
        for d in (tmp_path, two_rank_run['work'])
    )
    diff = max_abs_diff(one['state_dict'], two['state_dict'])
    print(f'seg MoRViT, {REFERENCE_ITERS} iterations: max |w_2proc - w_1proc| = {diff:.2e}')
    assert diff <= TOLERANCE
