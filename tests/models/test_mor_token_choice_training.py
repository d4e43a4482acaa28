"""MoR-ViT's token choice in training (docs/methods/mor_vit.md, issue 48.2): the masked path
(`token_adaptive.run_masked`: every token through every recursion, keys and updates of the routed tokens only; static
shapes, no host read) computes what the engine's subset path (`run_subset`, eval's) computes: the states after every
layer, the routers' losses and statistics, and the gradients of the input and of every parameter, the router's
included, side by side in one run (`masked_training=False` runs the subset path in training)."""

import pytest
import torch

from mmrecvit.models import MoRViT
from mmrecvit.models import token_adaptive as engine

pytestmark = pytest.mark.usefixtures('one_thread')

TINY = dict(arch='tiny', embed_dim=32, num_heads=2, img_size=64, routing='token_choice', num_recursions=4)

# The recipes' settings at toy size: the ViTDet recipes' drop path, windows with relative positions, global steps at
# the stage ends and activation checkpointing; global attention with relative positions; units of 2 blocks, MoR's
# additive update, no CLS (an image may then have no token left in a recursion).
CASES = {
    'vitdet': dict(drop_path_rate=0.1, window_size=2, use_rel_pos=True, with_cp=True),
    'global-relpos': dict(drop_path_rate=0.1, use_rel_pos=True),
    'global': dict(drop_path_rate=0.1),
    'unit2-additive-no-cls': dict(num_recursions=3, unit_size=2, update='additive', with_cls_token=False),
}


def build(**kwargs):
    torch.manual_seed(0)
    model = MoRViT(**{**TINY, **kwargs}).train()
    with torch.no_grad():  # spread the router's scores: depths that differ per token and per image
        model.router.weight.mul_(50.0)
        for name, p in model.named_parameters():
            if 'rel_pos' in name:  # zero at init: give the relative positions a say
                p.normal_(0.0, 0.5)
    return model


def train_step(model, images, masked, calls):
    """States after every layer, the statistics and the gradients of one training step on `images` (the same drop
    path draws: the same seed)."""
    model.masked_training = masked
    model.zero_grad(set_to_none=True)
    x = images.clone().requires_grad_(True)
    torch.manual_seed(1)
    states, stats = model.forward_intermediates(
        x, list(range(model.depth)), output_fmt='NLC', intermediates_only=True, return_stats=True
    )
    ran = calls.copy()  # the forward's (with_cp runs the blocks again in the backward)
    weights = torch.linspace(-1.0, 1.0, states[0].numel()).view(states[0].shape)
    loss = sum((s * weights).sum() for s in states) + sum(stats.aux_losses.values())
    loss.backward()
    grads = {'input': x.grad, **{n: p.grad for n, p in model.named_parameters() if p.grad is not None}}
    return states, stats, grads, ran


def close(a, b, what):
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * float(b.detach().abs().max()), msg=what)


@pytest.mark.parametrize('case', list(CASES))
def test_masked_training_equals_the_subset_path(case, monkeypatch):
    model = build(**CASES[case])
    calls = []
    for name in ('run_masked', 'run_subset'):  # which path ran
        real = getattr(engine, name)
        monkeypatch.setattr(engine, name, lambda *a, _n=name, _f=real, **k: calls.append(_n) or _f(*a, **k))
    images = torch.randn(3, 3, 80, 112)  # 5 x 7 patch tokens: windows of 2 padded
    masked = train_step(model, images, True, calls)
    calls.clear()
    subset = train_step(model, images, False, calls)
    R, u = model.num_recursions, model.unit_size
    assert masked[3] == ['run_masked'] * (R * u) and subset[3] == ['run_subset'] * (R * u)
    # The routing is not trivial: counts differ per image and per recursion (the subset path reads them)
    alive = subset[1].setting
    assert masked[1].setting is None and len({tuple(a) for a in alive}) > 2 and len(set(alive[1])) > 1
    for s, (a, b) in enumerate(zip(masked[0], subset[0])):
        close(a, b, f'{case}: state after layer {s}')
    assert masked[1].aux_losses.keys() == subset[1].aux_losses.keys() == {'loss_balance', 'loss_z'}
    for k, v in subset[1].aux_losses.items():
        close(masked[1].aux_losses[k], v, f'{case}: {k}')
    assert masked[1].scalars.keys() == subset[1].scalars.keys()
    for k, v in subset[1].scalars.items():
        close(masked[1].scalars[k], v, f'{case}: {k}')
    assert torch.equal(masked[1].token_maps['recursions'], subset[1].token_maps['recursions'])
    # Gradients: the input's and every parameter's (both paths reach the same ones), the router's through the gates
    assert masked[2].keys() == subset[2].keys() == {'input', *(n for n, _ in model.named_parameters())}
    assert subset[2]['router.weight'].abs().sum() > 0
    for k, v in subset[2].items():
        close(masked[2][k], v, f'{case}: gradient of {k}')


def test_eval_keeps_the_subset_path():
    """Eval runs the engine on the routed tokens only (the FLOP saving; its counts read once): the masked path is
    training's."""
    model = build().eval()
    with torch.no_grad():
        stats = model(torch.randn(2, 3, 64, 96)).stats
    assert stats.setting is not None and sum(map(sum, stats.setting)) < model.num_recursions * 2 * (4 * 6 + 1)
