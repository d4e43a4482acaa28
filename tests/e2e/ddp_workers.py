"""The processes of tests/e2e/test_distributed.py: every backbone variant trained under DDP (gloo) by
`torch.multiprocessing` (forked by the tests' `start_ranks`), and `train_backbone`, the one-process reference.
"""

import copy
import os
import os.path as osp

import torch
import torch.distributed as dist
from backbone_cases import BACKBONE_CASES

from mmrecvit.models import BACKBONES

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
    ('ReViT-with_cp', 'ReViT', dict(with_cp=True, drop_path_rate=0.1), False),
    # Outputs that stop before the last layer (issue 48.4): pruned at build, so nothing is left out of the graph.
    ('PlainViT-out-2-5-8', 'PlainViT', dict(depth=10, out_indices=(2, 5, 8)), True),
    ('EdgeRecViT-out-2-5-8', 'EdgeRecViT', dict(depth=10, out_indices=(2, 5, 8), drop_path_rate=0.1), False),
    ('NaiveRecursiveViT-out-early', 'NaiveRecursiveViT', dict(out_indices=(0, 2)), True),
    ('SRViT-out-early', 'SRViT', dict(out_indices=(1, 2), drop_path_rate=0.1), False),
    ('ReViT-out-early', 'ReViT', dict(depth=6, out_indices=(1, 3), final_norm=True, drop_path_rate=0.1), False),
    ('MoRViT-out-early', 'MoRViT', dict(out_indices=(1, 2)), True),
    ('MoRViT-token_choice-out-early', 'MoRViT', dict(out_indices=(0, 2), routing='token_choice'), False),
]

GLOBAL_BATCH, STEPS = 4, 2


def train_backbone(variant, rank=0, world_size=1):
    """STEPS AdamW steps of `variant` on this rank's share of a fixed global batch; its final weights.

    The loss is a mean over the rank's images, so DDP's gradient average is the global mean. A variant comparable
    with one process seeds every rank alike before each step (mmengine's default `diff_rank_seed=False`); the others
    seed each rank its own (`diff_rank_seed=True`), so reViT's ranks drop different steps and Edge-RecViT's draw
    different depths, and DDP must still find every parameter in every rank's graph.
    """
    _, name, kwargs, comparable = next(v for v in VARIANTS if v[0] == variant)
    torch.manual_seed(0)
    model = BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs}).train()
    net = model
    if world_size > 1:
        net = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images = torch.randn(GLOBAL_BATCH, 3, 48, 64, generator=torch.Generator().manual_seed(1))
    share = GLOBAL_BATCH // world_size
    images = images[rank * share : (rank + 1) * share]
    for step in range(STEPS):
        torch.manual_seed(100 + step + (0 if comparable else 1000 * rank))
        outs = net(images)
        loss = sum(o.square().mean() for o in outs) + sum(outs.stats.aux_losses.values(), torch.zeros(()))
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


# FSDP2 per block (issue 48.5): every method, its recipes' noise included (drop path, reViT's step dropout and aux
# losses, Edge-RecViT's depth draw, MoR-ViT's routers).
FSDP_VARIANTS = [
    'PlainViT',
    'NaiveRecursiveViT',
    'SRViT',
    'SRViT-hard',
    'ReViT',
    'ReViT-no-step-drop',
    'ReViT-with_cp',
    'EdgeRecViT',
    'EdgeRecViT-out-2-5-8',
    'MoRViT',
    'MoRViT-token_choice',
]


def fsdp_against_one_process(variant, rank):
    """STEPS SGD steps of `variant` with every unique block and the model `fully_shard`ed (FSDP2, this rank's shard)
    beside the same model unwrapped in this process, both on the same images and draws (every rank alike, so the
    gradient average is the one process's gradient): max |w_fsdp - w_1proc| over the gathered weights."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    _, name, kwargs, _ = next(v for v in VARIANTS if v[0] == variant)
    torch.manual_seed(0)
    model = BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs}).train()
    reference = copy.deepcopy(model)
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    images = torch.randn(2, 3, 48, 64, generator=torch.Generator().manual_seed(1))
    for net in (model, reference):
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        for step in range(STEPS):
            torch.manual_seed(100 + step)
            outs = net(images)
            loss = sum(o.square().mean() for o in outs) + sum(outs.stats.aux_losses.values(), torch.zeros(()))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    gathered = {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in model.state_dict().items()}
    initial = BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs}).state_dict()
    moved = max(float((gathered[k] - initial[k]).abs().max()) for k in initial)
    return max(float((gathered[k] - v).abs().max()) for k, v in reference.state_dict().items()), moved


def all_gathers(name, reshard_after_forward):
    """FSDP2's all-gathers in one training step (forward and backward, after one warm-up step) of `name` at 12
    layers (PlainViT 12 blocks; SR-ViT 6 blocks in units [2, 2, 1, 1] x [4, 4, 2, 2] recursions: 20 applications;
    reViT 1 block, 12 applications), every block `fully_shard`ed with `reshard_after_forward`; docs/multi_node.md."""
    from torch.distributed.fsdp import fully_shard

    calls, gather = [0], dist.all_gather_single  # FSDP2's collective (torch/distributed/fsdp/_fully_shard)

    def counted(*args, **kwargs):
        calls[0] += 1
        return gather(*args, **kwargs)

    torch.manual_seed(0)
    twelve = dict(num_recursions=[4, 4, 2, 2]) if name == 'SRViT' else dict(depth=12)
    model = BACKBONES[name](**{**BACKBONE_CASES[name], **twelve}).train()
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=reshard_after_forward)
    fully_shard(model)
    dist.all_gather_single = counted
    try:
        for _ in range(2):
            calls[0] = 0
            outs = model(torch.randn(2, 3, 48, 64))
            (sum(o.mean() for o in outs) + sum(outs.stats.aux_losses.values(), torch.zeros(()))).backward()
    finally:
        dist.all_gather_single = gather
    return calls[0]


def _fsdp_worker(rank, world_size, port, out_dir):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    results = {
        f'all-gathers {name} {reshard}': all_gathers(name, reshard)
        for name in ('PlainViT', 'SRViT', 'ReViT')
        for reshard in (True, False)
    }
    for variant in FSDP_VARIANTS:
        try:
            results[variant] = fsdp_against_one_process(variant, rank)
        except Exception as e:  # reported per variant by the tests
            results[variant] = f'{type(e).__name__}: {e}'
    torch.save(results, osp.join(out_dir, f'fsdp{rank}.pth'))
    dist.destroy_process_group()
