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
experts), so the shipped configs keep DDP's cheaper default.

Fast part: `torch.multiprocessing` + gloo on the bare backbones. Slow part: `tools/dist_train.sh`
with 2 processes vs `tools/train.py` with one, toy UperNet + MoR-ViT.
"""
import glob
import os
import os.path as osp
import socket
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from backbone_cases import BACKBONE_CASES
from conftest import REPO, toy_cfg_options
from mmengine.config import Config

from mmrecvit.models import BACKBONES

TOLERANCE = 1e-5
# (variant, backbone, extra kwargs, comparable with one process)
VARIANTS = [
    ('PlainViT', 'PlainViT', {}, True),
    ('NaiveRecursiveViT', 'NaiveRecursiveViT', {}, True),
    ('SRViT', 'SRViT', {}, True),
    ('SRViT-hard', 'SRViT', dict(readout='hard'), True),
    ('ReViT-no-step-drop', 'ReViT', dict(step_drop_rate=0.0), True),
    ('MoRViT', 'MoRViT', {}, True),
    ('ReViT', 'ReViT', dict(drop_path_rate=0.1), False),
    ('EdgeRecViT', 'EdgeRecViT', dict(drop_path_rate=0.1), False),
    ('EdgeRecViT-capped', 'EdgeRecViT', dict(max_depth=3), False),
    ('MoRViT-token_choice', 'MoRViT', dict(routing='token_choice'), False),
]
GLOBAL_BATCH, STEPS = 4, 2


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def train_backbone(variant, rank=0, world_size=1):
    """STEPS AdamW steps of `variant` on this rank's share of a fixed global batch; its final weights.

    The loss is a mean over the rank's images, so DDP's gradient average is the global mean.
    Every rank seeds alike before each step (mmengine's default `diff_rank_seed=False`).
    """
    _, name, kwargs, _ = next(v for v in VARIANTS if v[0] == variant)
    torch.manual_seed(0)
    model = BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs}).train()
    net = model
    if world_size > 1:
        net = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images = torch.randn(GLOBAL_BATCH, 3, 48, 64, generator=torch.Generator().manual_seed(1))
    share = GLOBAL_BATCH // world_size
    images = images[rank * share: (rank + 1) * share]
    for step in range(STEPS):
        torch.manual_seed(100 + step)
        outs = net(images)
        loss = sum(o.square().mean() for o in outs) + sum(model.stats.aux_losses.values(), torch.zeros(()))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _ddp_worker(rank, world_size, port, out_dir):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    results = {}
    for variant, *_ in VARIANTS:
        try:
            results[variant] = train_backbone(variant, rank, world_size)
        except Exception as e:  # reported per variant by the tests
            results[variant] = f'{type(e).__name__}: {e}'
    torch.save(results, osp.join(out_dir, f'rank{rank}.pth'))
    dist.destroy_process_group()


@pytest.fixture(scope='module')
def ddp_results(tmp_path_factory):
    out = tmp_path_factory.mktemp('ddp')
    mp.spawn(_ddp_worker, args=(2, free_port(), str(out)), nprocs=2)
    return [torch.load(out / f'rank{r}.pth', weights_only=True) for r in range(2)]


def max_abs_diff(a, b):
    assert a.keys() == b.keys()
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


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


def _warn_worker(rank, world_size, port, out_dir):
    """Rank 1's router produces NaN (its bias poisoned after DDP's broadcast); nonfinite='warn'."""
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = BACKBONES['SRViT'](**BACKBONE_CASES['SRViT'], nonfinite='warn').train()
    net = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=False)
    if rank == 1:
        with torch.no_grad():
            model.routers['0'].proj.bias.fill_(float('nan'))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images = torch.randn(2, 3, 48, 64, generator=torch.Generator().manual_seed(rank))
    for _ in range(STEPS):
        loss = sum(o.square().mean() for o in net(images))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, osp.join(out_dir, f'warn{rank}.pth'))
    dist.destroy_process_group()


def test_warn_mode_on_one_rank_keeps_ddp_in_step(tmp_path):
    """A rank whose router output is skipped (nonfinite='warn') still gives DDP a gradient for every
    router parameter (a zero), so neither rank fails nor hangs; bounded by a timeout."""
    context = mp.spawn(_warn_worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=False)
    deadline = time.monotonic() + 120
    while not context.join(timeout=5):
        if time.monotonic() > deadline:
            for p in context.processes:
                p.terminate()
            pytest.fail('DDP hung: a rank in nonfinite="warn" dropped parameters from the graph')
    rank0 = torch.load(tmp_path / 'warn0.pth', weights_only=True)
    assert all(torch.isfinite(v).all() for v in rank0.values())  # rank 1's skipped router gave zero gradients


CONFIGS = sorted(p for task in ('cls', 'det', 'seg') for p in glob.glob(f'{REPO}/configs/{task}/*.py'))  # not d2/


@pytest.mark.slow
def test_every_shipped_backbone_config_puts_every_parameter_in_the_graph():
    """What DDP with `find_unused_parameters=False` needs, for the backbone settings of every config
    (sizes, depths, out_indices: a config whose outputs stop before the last step would leave
    blocks unused and fail on the second DDP iteration)."""
    seen = set()
    for path in CONFIGS:
        backbone = {k: v for k, v in Config.fromfile(path).model.backbone.items() if k not in ('_delete_', 'init_cfg')}
        key = repr(sorted(backbone.items()))
        if key in seen:
            continue
        seen.add(key)
        torch.manual_seed(0)
        model = BACKBONES[backbone.pop('type')](**backbone).train()
        outs = model(torch.randn(2, 3, 64, 64))
        (sum(o.mean() for o in outs) + sum(model.stats.aux_losses.values(), torch.zeros(()))).backward()
        unused = [n for n, p in model.named_parameters() if p.grad is None]
        assert not unused, f'{osp.relpath(path, REPO)}: parameters outside the graph {unused}'


# ---- through the tools ---------------------------------------------------------------------------------
SEG = osp.join(REPO, 'configs/seg/upernet_morvit-ti_1xb4-150it_toy-ade20k-256x256.py')
ITERS = 3


def deterministic_seg_config(tmp_path):
    path = tmp_path / 'morvit_deterministic.py'
    path.write_text(f"""_base_ = '{SEG}'
train_dataloader = dict(dataset=dict(pipeline=[
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='Resize', scale=(320, 256), keep_ratio=True),
    dict(type='PackSegInputs'),
]))
model = dict(decode_head=dict(dropout_ratio=0.0), auxiliary_head=dict(dropout_ratio=0.0))
randomness = dict(seed=0, deterministic=True)
""")
    return str(path)


@pytest.mark.slow
def test_dist_train_with_two_processes_equals_one_process(toy_root, tmp_path, deterministic_torch):
    sys.path.insert(0, osp.join(REPO, 'tools'))
    import train as train_tool  # tools/train.py

    config = deterministic_seg_config(tmp_path)
    train_tool.main([config, *toy_cfg_options('seg', toy_root, tmp_path / 'one', iters=ITERS, batch=2)])
    env = {**os.environ, 'PYTHON': sys.executable, 'PORT': str(free_port()), 'OMP_NUM_THREADS': '1'}
    cmd = ['bash', osp.join(REPO, 'tools/dist_train.sh'), config, '2',
           *toy_cfg_options('seg', toy_root, tmp_path / 'two', iters=ITERS, batch=1)]
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    one, two = (torch.load(tmp_path / d / f'iter_{ITERS}.pth', map_location='cpu', weights_only=True)
                for d in ('one', 'two'))
    assert two['rng_states']['world_size'] == 2 and len(two['rng_states']['ranks']) == 2
    diff = max_abs_diff(one['state_dict'], two['state_dict'])
    print(f'seg MoRViT, {ITERS} iterations: max |w_2proc - w_1proc| = {diff:.2e}')
    assert diff <= TOLERANCE
