"""Exact resume (issue 9): interrupted after k iterations + `--resume` == the uninterrupted run, bit for bit.

Toy Mask R-CNN with Edge-RecViT (Gumbel-softmax noise, drop path; mmdet's RPN/RoI samplers draw
random numbers too) and toy UperNet with reViT (step dropout, drop path; random resize, crop and
flip in the data pipeline), on CPU with `randomness=dict(seed=0, deterministic=True)` and
`num_workers=0`: 4 iterations in one run (validating after 2 and 4) vs. 2 iterations (validation
after the checkpoint) then `--resume` to 4. Every tensor of the final state dicts is equal.
`RNGStateHook` (in the recipes' `custom_hooks`) makes it so; the control run resumes without it
and must differ, which shows that the comparison sees the random streams. (Also measured while
writing this: restoring the states before the loop's fast-forward over the trained batches, or
letting the validation at K draw from the training streams, each break the equality: ~3e-4.)
"""
import glob
import os.path as osp
import random
import shutil
import sys

import numpy as np
import pytest
import torch
from conftest import REPO, toy_cfg_options
from mmengine.config import Config

from mmrecvit.mm.hooks import get_rng_states, set_rng_states

sys.path.insert(0, osp.join(REPO, 'tools'))
import train as train_tool  # noqa: E402  (tools/train.py)

DET = osp.join(REPO, 'configs/det/mask-rcnn_edgerecvit-ti_fpn_1xb2-800it_toy-coco.py')
SEG = osp.join(REPO, 'configs/seg/upernet_revit-ti_1xb4-150it_toy-ade20k-256x256.py')
K, N = 2, 4
# Randomness on in the backbone (the toy configs leave drop path at 0); deterministic kernels.
EXTRA = ['randomness.seed=0', 'randomness.deterministic=True', 'model.backbone.drop_path_rate=0.1']


def train(config, task, root, work, iters, *args, options=()):
    train_tool.main([config, *args, *toy_cfg_options(task, root, work, iters=iters), *EXTRA, *options])
    return torch.load(work / f'iter_{iters}.pth', map_location='cpu', weights_only=True)


def max_abs_diff(a, b):
    assert a.keys() == b.keys()
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


def write_config_without_rng_hook(config, tmp_path):
    path = tmp_path / 'no_rng_hook.py'
    path.write_text(f"_base_ = '{config}'\ncustom_hooks = [dict(type='RecursionHook')]\n")
    return str(path)


def draws():
    return random.random(), np.random.rand(3).tolist(), torch.rand(3).tolist()


def test_rng_states_round_trip_through_a_weights_only_checkpoint(tmp_path):
    states = get_rng_states()
    expected = draws()
    torch.save({'rng_states': {'world_size': 1, 'ranks': [states]}}, tmp_path / 'c.pth')
    loaded = torch.load(tmp_path / 'c.pth', weights_only=True)  # no allow-listing needed
    draws()
    set_rng_states(loaded['rng_states']['ranks'][0])
    assert draws() == expected


def test_every_shipped_config_saves_rng_states():
    """The recipe bases list the hook, and no config replaces their `custom_hooks`."""
    bases = [f'{REPO}/configs/det/_base_/models/mask-rcnn_vit_fpn.py',
             f'{REPO}/configs/seg/_base_/upernet_vit_8xb2-160k_ade20k-512x512.py',
             f'{REPO}/configs/cls/_base_/recvit-small_4xb256_in1k.py']
    for path in bases:
        assert {'RecursionHook', 'RNGStateHook'} <= {h['type'] for h in Config.fromfile(path).custom_hooks}
    others = [p for p in glob.glob(f'{REPO}/configs/**/*.py', recursive=True) if p not in bases]
    assert others and not [p for p in others if 'custom_hooks' in open(p).read()]


@pytest.mark.slow
@pytest.mark.usefixtures('deterministic_torch')
@pytest.mark.parametrize('config, task', [(DET, 'det'), (SEG, 'seg')], ids=['det-edgerecvit', 'seg-revit'])
def test_interrupted_and_resumed_run_is_bit_identical(toy_root, tmp_path, config, task):
    # The uninterrupted run also validates at K: validation must not shift the training random streams.
    full = train(config, task, toy_root, tmp_path / 'full', N, options=[f'train_cfg.val_interval={K}'])
    interrupted = train(config, task, toy_root, tmp_path / 'resumed', K)
    assert interrupted['rng_states']['world_size'] == 1
    if task == 'det':
        shutil.copytree(tmp_path / 'resumed', tmp_path / 'control')
        (tmp_path / 'control' / 'last_checkpoint').write_text(str(tmp_path / 'control' / f'iter_{K}.pth'))
    resumed = train(config, task, toy_root, tmp_path / 'resumed', N, '--resume')
    assert resumed['meta']['iter'] == N
    diff = max_abs_diff(full['state_dict'], resumed['state_dict'])
    print(f'{task}: max |w_full - w_resumed| = {diff}')
    assert diff == 0.0
    for k, v in full['state_dict'].items():
        assert torch.equal(v, resumed['state_dict'][k]), k
    if task == 'det':  # the control: the same resume without the hook is not exact
        no_hook = train(write_config_without_rng_hook(config, tmp_path), task, toy_root, tmp_path / 'control', N,
                        '--resume')
        control_diff = max_abs_diff(full['state_dict'], no_hook['state_dict'])
        print(f'{task} without RNGStateHook: max |w_full - w_resumed| = {control_diff}')
        assert control_diff > 0
