"""Host syncs per forward and backward of every method (issue 48.2), counted on the CPU with a dispatch mode
(`benchmark.host_sync.HostSyncCounter`: the reads that would make the host wait for a GPU).

Pinned: none in any training forward + backward, none in eval where the shapes do not follow the data, one in the
evals whose shapes do (Edge-RecViT's token-adaptive execution, MoR-ViT's token choice: the per-step token counts
read once), in the recipes' settings: global attention, windows with relative positions, activation checkpointing
and reViT's `*-elastic` step dropout (configs/det/*revit-*-elastic*: step_drop_rate=0.3). The non-finite guard
('raise', the default) reads nothing in the forward (tests/models/test_numerics.py: it still raises);
nonfinite='warn' costs one sync per check, no more. Uploads (tensors made from Python data, copies of CPU tensors to
the device: a stream sync on a GPU from pageable memory) are pinned apart: none, but for Edge-RecViT's compute knob,
which uploads the settings it chose on the host after its one read.
"""

import pytest
import torch
from backbone_cases import tiny_backbone

from mmrecvit.benchmark.host_sync import HostSyncCounter
from mmrecvit.models.numerics import FiniteGuard, check_finite

pytestmark = pytest.mark.usefixtures('one_thread')

# case -> (backbone, arguments, training syncs, eval syncs)
CASES = {
    'PlainViT': ('PlainViT', {}, 0, 0),
    'NaiveRecursiveViT': ('NaiveRecursiveViT', {}, 0, 0),
    'SRViT': ('SRViT', {}, 0, 0),
    'ReViT': ('ReViT', dict(step_drop_rate=0.0), 0, 0),
    # Step dropout (`step_dropout.py`, issue 48.1): groups and kept steps drawn on the device, static shapes
    'ReViT-elastic': ('ReViT', dict(step_drop_rate=0.3), 0, 0),
    'EdgeRecViT': ('EdgeRecViT', {}, 0, 1),  # eval: the engine's per-step token counts (`DepthSubsets`)
    'MoRViT': ('MoRViT', {}, 0, 0),
    # Token choice trains on the masked path (static shapes); eval: the engine's per-recursion token counts, read once
    'MoRViT-token_choice': ('MoRViT', dict(routing='token_choice'), 0, 1),
}
SETTINGS = {
    'global': {},
    'windows-relpos': dict(window_size=2, use_rel_pos=True),  # the ViTDet recipes' (2x2 windows of the 4x4 grid)
    'with_cp': dict(with_cp=True),
}
# The compute knob's evals (eval only; token choice takes none): as the plain evals (Edge-RecViT's knob reads its
# candidates' counts, and the engine takes the chosen ones from that read)
COMPUTE_EVAL = {}


def images():
    return torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))


def train_step(model, x):
    outs = model(x)
    loss = sum(o.square().mean() for o in outs) + sum(outs.stats.aux_losses.values(), torch.zeros(()))
    loss.backward()


def syncs(fn, *args, **kwargs):
    """Host syncs of `fn(...)` and what made them; no upload (reViT built its depth grid with `torch.tensor` at every
    training forward and eval merge, Edge-RecViT's compute knob its chosen shifts, before issue 48.2)."""
    with HostSyncCounter() as counter:
        fn(*args, **kwargs)
    assert counter.uploads == 0, f'uploads: {dict(counter.counts)}'
    return counter.syncs, counter.summary()


@pytest.mark.parametrize('setting', list(SETTINGS))
@pytest.mark.parametrize('case', list(CASES))
def test_host_syncs_per_forward_and_backward(case, setting):
    name, kwargs, train, evaluate = CASES[case]
    model = tiny_backbone(name, **kwargs, **SETTINGS[setting]).train()
    x = images()
    for _ in range(2):  # the first step (schedules built) and a later one
        n, what = syncs(train_step, model, x)
        assert n == train, f'{case} {setting} training step: {what}'
    model.eval()
    with torch.no_grad():
        for _ in range(2):  # the first eval forward after training (reViT fills its merged-FFN cache) and a later one
            n, what = syncs(model, x)
            assert n == evaluate, f'{case} {setting} eval forward: {what}'
        if name != 'MoRViT' or kwargs.get('routing') != 'token_choice':
            n, what = syncs(model, x, compute=0.5)
            assert n == COMPUTE_EVAL.get(case, evaluate), f'{case} {setting} eval forward, compute=0.5: {what}'
    check_finite(model)  # the deferred checks: all finite


@pytest.mark.parametrize('case', ['SRViT', 'ReViT', 'EdgeRecViT', 'MoRViT', 'MoRViT-token_choice'])
def test_warn_mode_costs_one_sync_per_check(case, monkeypatch):
    """nonfinite='warn' decides at each check whether to cut the tensor from the graph: one sync per router output
    and aux loss checked, on top of what 'raise' costs (nothing)."""
    name, kwargs, train, evaluate = CASES[case]
    checks = []
    call = FiniteGuard.__call__
    monkeypatch.setattr(FiniteGuard, '__call__', lambda self, *a, **k: checks.append(1) or call(self, *a, **k))
    x = images()
    for mode, expected in (('train', train), ('eval', evaluate)):
        model = tiny_backbone(name, **kwargs, nonfinite='warn').train(mode == 'train')
        checks.clear()
        with torch.set_grad_enabled(mode == 'train'):
            n, what = syncs(train_step if mode == 'train' else model, *((model, x) if mode == 'train' else (x,)))
        assert checks and n == expected + len(checks), f'{case} {mode}: {len(checks)} checks, syncs {what}'


@pytest.mark.parametrize('fraction', [0.3, 0.6, 0.9])
def test_edge_recvit_knob_hands_its_counts_to_the_engine(fraction, monkeypatch):
    """The compute knob's one read: the engine runs on the counts `depths_within` read for the depths it chose,
    the same outputs and setting as counting those depths again (the second read it replaced)."""
    model, x = tiny_backbone('EdgeRecViT').eval(), images()
    with torch.no_grad():
        outs = model(x, compute=fraction)
        within = type(model).depths_within
        monkeypatch.setattr(type(model), 'depths_within', lambda *a: (within(*a)[0], None))
        again = model(x, compute=fraction)
    assert outs.stats.setting == again.stats.setting
    assert all(torch.equal(a, b) for a, b in zip(outs, again))
