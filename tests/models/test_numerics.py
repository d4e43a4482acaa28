"""Numerics (issue 9, 48.2): non-finite router logits and aux losses are caught; bf16 autocast on CPU works.

* A NaN/inf in any router's logits (SR-ViT's soft routers, reViT's depth router, Edge-RecViT's
  ranker, MoR-ViT's expert-choice routers and token-choice router) or in an auxiliary loss raises
  `NonFiniteError` naming the backbone, the module and the step (`nonfinite='raise'`, the default), in
  training and in eval: read after the forward without a host sync (48.2), by `check_finite` (the
  training hooks' once-per-iteration read) or at the backbone's next forward; inside a run,
  `RecursionHook` adds the training iteration.
* `nonfinite='warn'` logs the same text, replaces the values by 0 and goes on: outputs, aux losses
  and every gradient stay finite. `nonfinite='off'` checks nothing.
* Every backbone (and the routing variants) runs forward and backward under bf16 autocast on CPU.
"""

import logging
import re

import pytest
import torch
from backbone_cases import BACKBONE_CASES

from mmrecvit.models import BACKBONES
from mmrecvit.models.numerics import FiniteGuard, NonFiniteError, check_finite

pytestmark = pytest.mark.usefixtures('one_thread')

NAN, INF = float('nan'), float('inf')

# (case id, backbone, extra kwargs, parameter to poison, words the error must contain)
ROUTER_CASES = [
    ('SRViT', 'SRViT', {}, 'routers.1.proj.weight', ['SRViT:', 'routers.1 logits at unit 1, recursion 1']),
    (
        'SRViT-recursion_states',
        'SRViT',
        dict(router_input='recursion_states'),
        'routers.2.proj.weight',
        ['routers.2 logits at unit 2, recursion 1', 'unit 2, recursion 2'],
    ),
    (
        'ReViT',
        'ReViT',
        dict(step_drop_rate=0.0),
        'router.fc2.weight',
        ['ReViT:', 'router logits at step 0 (s=0)', 'step 3 (s=1)'],
    ),
    (
        'EdgeRecViT',
        'EdgeRecViT',
        {},
        'ranker.fc2.weight',
        ['EdgeRecViT:', 'ranker logits at the depth assignment (before step 0)'],
    ),
    ('MoRViT', 'MoRViT', {}, 'routers.2.weight', ['MoRViT:', 'routers.2 logits at recursion 2 (token selection)']),
    (
        'MoRViT-token_choice',
        'MoRViT',
        dict(routing='token_choice'),
        'router.weight',
        ['MoRViT:', 'router logits at the depth assignment (before recursion 0)'],
    ),
]

# Finite logits whose aux loss overflows: (case id, backbone, extra kwargs, parameter, value, loss name)
AUX_CASES = [
    ('ReViT', 'ReViT', dict(step_drop_rate=0.0), 'router.fc2.bias', 1e30, 'loss_revit_z'),
    ('EdgeRecViT', 'EdgeRecViT', {}, 'ranker.fc2.weight', 1e30, 'loss_stb'),
    ('MoRViT-token_choice', 'MoRViT', dict(routing='token_choice'), 'router.bias', 1e30, 'loss_z'),
]


def build(name, **kwargs):
    torch.manual_seed(0)
    return BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs})


def poison(model, param, value):
    with torch.no_grad():
        model.get_parameter(param).fill_(value)


def images(batch=2):
    return torch.randn(batch, 3, 48, 64, generator=torch.Generator().manual_seed(3))


def run(model, train):
    model.train(train)
    with torch.set_grad_enabled(train):
        return model(images())


@pytest.mark.parametrize('value', [NAN, INF], ids=['nan', 'inf'])
@pytest.mark.parametrize('train', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('case, name, kwargs, param, words', ROUTER_CASES, ids=[c[0] for c in ROUTER_CASES])
def test_non_finite_router_logits_raise_naming_module_and_step(case, name, kwargs, param, words, train, value):
    model = build(name, **kwargs)
    run(model, train)  # fine before
    check_finite(model)
    poison(model, param, value)
    outs = run(model, train)  # no sync in the forward: the check is read after it
    assert all(torch.isfinite(o).all() for o in outs)  # the bad logits were replaced by 0
    with pytest.raises(NonFiniteError) as info:
        check_finite(model)
    for w in words:
        assert w in str(info.value), str(info.value)
    check_finite(model)  # read once: reported once


@pytest.mark.parametrize('case, name, kwargs, param, words', ROUTER_CASES, ids=[c[0] for c in ROUTER_CASES])
def test_the_next_forward_raises_for_the_last_one(case, name, kwargs, param, words):
    """A plain PyTorch loop that never calls `check_finite` stops at the next forward (on the CPU the flags are on
    the host at once), naming the forward that failed."""
    model = build(name, **kwargs)
    poison(model, param, NAN)
    run(model, True)
    poison(model, param, 0.0)
    with pytest.raises(NonFiniteError, match=re.escape(words[-1])):
        run(model, True)
    run(model, True)  # the poisoned forward is reported once; this one is finite


@pytest.mark.parametrize('case, name, kwargs, param, value, loss', AUX_CASES, ids=[c[0] for c in AUX_CASES])
def test_non_finite_aux_losses_raise_naming_the_loss(case, name, kwargs, param, value, loss):
    model = build(name, **kwargs)
    poison(model, param, value)
    run(model, True)
    with pytest.raises(NonFiniteError, match=f'auxiliary loss {loss} at the end of the forward'):
        check_finite(model)


@pytest.mark.parametrize('case, name, kwargs, param, words', ROUTER_CASES, ids=[c[0] for c in ROUTER_CASES])
def test_warn_mode_skips_the_bad_values_and_keeps_training_finite(case, name, kwargs, param, words, caplog):
    model = build(name, nonfinite='warn', drop_path_rate=0.1, **kwargs)
    poison(model, param, NAN)
    with caplog.at_level(logging.WARNING, logger='mmrecvit'):
        outs = run(model, True)
    assert any(words[-1] in r.getMessage() and "nonfinite='warn'" in r.getMessage() for r in caplog.records)
    loss = sum(o.square().mean() for o in outs) + sum(outs.stats.aux_losses.values(), torch.zeros(()))
    assert torch.isfinite(loss)
    loss.backward()
    bad = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    assert not bad, f'non-finite gradients: {bad}'


@pytest.mark.parametrize('case, name, kwargs, param, value, loss', AUX_CASES, ids=[c[0] for c in AUX_CASES])
def test_warn_mode_zeroes_an_overflowing_aux_loss(case, name, kwargs, param, value, loss, caplog):
    model = build(name, nonfinite='warn', **kwargs)
    poison(model, param, value)
    with caplog.at_level(logging.WARNING, logger='mmrecvit'):
        outs = run(model, True)
    assert f'auxiliary loss {loss}' in caplog.text
    assert outs.stats.aux_losses[loss].item() == 0.0


def test_finite_models_check_silently_and_the_default_is_raise(caplog):
    for name in sorted(BACKBONES):
        model = build(name)
        assert model.nonfinite == 'raise'
        with caplog.at_level(logging.WARNING, logger='mmrecvit'):
            for train in (True, False):
                run(model, train)
        check_finite(model)
    assert not caplog.records


@pytest.mark.parametrize('case, name, kwargs, param, words', ROUTER_CASES, ids=[c[0] for c in ROUTER_CASES])
def test_off_mode_checks_and_replaces_nothing(case, name, kwargs, param, words, caplog):
    """nonfinite='off': the NaN travels as in any network, nothing is recorded, nothing raises or warns."""
    model = build(name, nonfinite='off', **kwargs)
    poison(model, param, NAN)
    with caplog.at_level(logging.WARNING, logger='mmrecvit'):
        outs = run(model, True)
        run(model, True)
    check_finite(model)
    assert not model.finite_checks.pending and not caplog.records
    loss = sum(o.square().mean() for o in outs) + sum(outs.stats.aux_losses.values(), torch.zeros(()))
    assert not torch.isfinite(loss)


def test_check_finite_reads_the_log_values_and_the_checks_in_one_transfer():
    from mmrecvit.benchmark.host_sync import HostSyncCounter

    model = build('SRViT')
    outs = run(model, True)
    scalars = list(outs.stats.scalars.values())
    with HostSyncCounter() as counter:
        values = check_finite(model, scalars)
    assert counter.syncs == 1, counter.summary()
    assert values.device.type == 'cpu' and values.tolist() == [v.item() for v in scalars]


# ---- bf16 autocast on CPU -----------------------------------------------------------------------------
BF16_CASES = (
    [(name, {}) for name in sorted(BACKBONES)]
    + [
        ('SRViT', dict(readout='hard')),
        ('SRViT', dict(router_input='recursion_states')),
        ('EdgeRecViT', dict(execution='masked')),
        ('MoRViT', dict(routing='token_choice')),
        ('ReViT', dict(num_experts=1)),
    ]
    + [(name, dict(window_size=3, global_steps=(0,))) for name in sorted(BACKBONES)]
)  # windows, padded grid


@pytest.mark.parametrize(
    'name, kwargs', BF16_CASES, ids=[f'{n}{"-" if k else ""}{"-".join(map(str, k.values()))}' for n, k in BF16_CASES]
)
def test_bf16_autocast_forward_and_backward_on_cpu(name, kwargs):
    model = build(name, drop_path_rate=0.1, **kwargs)
    x = images()
    for train in (True, False):  # eval with autograd too: the token engine's and reViT's eval paths
        model.train(train)
        model.zero_grad(set_to_none=True)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            outs = model(x)
            loss = sum(o.float().square().mean() for o in outs) + sum(outs.stats.aux_losses.values(), torch.zeros(()))
        assert torch.isfinite(loss)
        loss.backward()
        params = dict(model.named_parameters())
        missing = [n for n, p in params.items() if p.grad is None]
        if train:
            assert not missing, f'no gradient for {missing}'
        bad = [n for n, p in params.items() if p.grad is not None and not torch.isfinite(p.grad).all()]
        assert not bad, f'non-finite gradients: {bad}'
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):  # inference: caches, in-place rows
        for o in model.eval()(x):
            assert torch.isfinite(o).all()


# ---- nonfinite='warn' keeps every parameter in the graph -------------------------------------------------------
@pytest.mark.parametrize('name', ['SRViT', 'ReViT', 'EdgeRecViT', 'MoRViT'])
def test_warn_mode_keeps_the_routers_in_the_graph(name):
    model = BACKBONES[name](**BACKBONE_CASES[name], nonfinite='warn').train()
    router = {
        'SRViT': 'routers.0.proj.bias',
        'ReViT': 'router.fc2.bias',
        'EdgeRecViT': 'ranker.fc2.weight',
        'MoRViT': 'routers.0.bias',
    }[name]
    with torch.no_grad():
        model.get_parameter(router).fill_(float('nan'))
    outs = model(torch.randn(2, 3, 64, 64))
    loss = sum(o.mean() for o in outs) + sum(outs.stats.aux_losses.values(), torch.zeros(()))
    loss.backward()
    assert torch.isfinite(loss)
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, f'parameters that left the graph: {missing}'
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_finite_guard_warn_returns_a_zero_attached_to_the_source():
    source = torch.nn.Linear(3, 2)
    with torch.no_grad():
        source.weight[0, 0] = float('inf')
    value = source(torch.ones(1, 3))
    out = FiniteGuard('X', 'warn')('logits', 'here', value, source)
    assert out[0, 0] == 0 and out[0, 1] == value[0, 1] and out.requires_grad
    out.sum().backward()
    assert torch.equal(source.weight.grad, torch.zeros(2, 3))


def test_flags_still_on_the_device_are_read_in_the_one_transfer_and_past_the_limit(monkeypatch):
    """On a GPU a forward's flags reach the host when the device has passed it (`PendingChecks.ready`); emulated
    here by flags never ready: `check_finite` reads them with the log's scalars in its one transfer, and a loop that
    never synchronises waits for the oldest forward's only past `PENDING_LIMIT` unread forwards."""
    from mmrecvit.benchmark.host_sync import HostSyncCounter
    from mmrecvit.models import numerics

    monkeypatch.setattr(numerics.PendingChecks, 'ready', lambda self: False)
    model = build('MoRViT').train()
    outs = run(model, True)
    poison(model, 'routers.2.weight', NAN)
    run(model, True)
    with HostSyncCounter() as counter, pytest.raises(NonFiniteError, match='routers.2 logits at recursion 2'):
        check_finite(model, list(outs.stats.scalars.values()))
    assert counter.syncs == 1, counter.summary()
    poison(model, 'routers.2.weight', INF)
    model.eval()
    with torch.no_grad():
        for _ in range(numerics.PENDING_LIMIT + 1):
            with HostSyncCounter() as counter:
                model(images())
            assert counter.syncs == 0, counter.summary()
        with HostSyncCounter() as counter, pytest.raises(NonFiniteError, match='routers.2 logits'):
            model(images())  # the oldest of 17 unread forwards, read (one wait)
    assert counter.syncs == 1, counter.summary()
