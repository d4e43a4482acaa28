"""reViT's step dropout at scale (issue 48.1, docs/methods/revit.md "Elastic depth in training"): one block call per
step at any batch, nothing read back to the host, the per-image rate, parity with the forward without it, and one
compiled graph."""

import pytest
import torch
import torch.nn.functional as F
from backbone_cases import program_router, tiny_revit

from mmrecvit.benchmark.host_sync import HostSyncCounter
from mmrecvit.models.numerics import FiniteGuard
from mmrecvit.models.step_dropout import keep_rate, sample_steps

pytestmark = pytest.mark.usefixtures('one_thread')


def loss_of(outs):
    return sum((o.float() ** 2).mean() for o in outs)


@pytest.mark.parametrize('batch', [2, 16, 64])
def test_one_block_call_per_step_at_any_batch(batch):
    model = tiny_revit(depth=12, step_drop_rate=0.3).train()
    calls = []
    model.block.register_forward_hook(lambda *_: calls.append(1))
    loss_of(model(torch.randn(batch, 3, 32, 32))).backward()
    assert len(calls) == 12


def test_no_host_sync_in_the_training_forward_and_backward(monkeypatch):
    """The non-finite guard's one read at the end of the forward (numerics.py, issue 48.2) is left out: step dropout
    itself reads nothing back and uploads nothing."""
    monkeypatch.setattr(FiniteGuard, 'finish', lambda self: None)
    model = program_router(tiny_revit(depth=12, step_drop_rate=0.3)).train()
    x = torch.randn(16, 3, 32, 32)
    with HostSyncCounter() as counter:
        loss_of(model(x)).backward()
    assert (counter.syncs, counter.uploads) == (0, 0), counter.counts


@pytest.mark.parametrize('batch, groups', [(64, 8), (64, 64), (2, 8), (6, 8)])
def test_each_image_runs_each_step_with_the_paper_rate(batch, groups):
    """Over many draws the share of (image, step) applications is E[max(K0, 2)] / L (the paper's 1 - p with the
    top-up to 2), every image keeps at least 2 steps, and the steps are alike."""
    model = tiny_revit(depth=12, step_drop_rate=0.3, step_drop_groups=groups)
    torch.manual_seed(0)
    kept = torch.stack([model.sample_kept_steps(batch) for _ in range(4000 // batch + 100)]).float()
    assert kept.mean().item() == pytest.approx(0.7, abs=0.01)
    assert kept.mean((0, 1)).sub(0.7).abs().max() < 0.05  # per step
    assert (kept.sum(-1) >= 2).all()


def test_at_least_two_steps_at_a_high_rate():
    torch.manual_seed(0)
    for _ in range(200):
        draw = sample_steps(8, 12, 0.95)
        assert (draw.kept.sum(0) >= 2).all()
        assert draw.slot_kept.sum() == draw.kept.sum()  # every kept step ran in a slot
    assert keep_rate(12, 0.95) == pytest.approx(0.1685, abs=1e-4)


def reference(model, img):
    """The forward without step dropout written out (docs/methods/revit.md): the last layer's state."""
    x = model.embed(img)
    L, blk, r = model.depth, model.block, model.router
    s = torch.arange(L, dtype=torch.float32)[:, None] / (L - 1)
    g = torch.softmax(r.fc2(F.silu(r.fc1(s))), dim=-1)
    for t in range(L):
        w1, b1 = torch.einsum('e,ehd->hd', g[t], blk.mlp.fc1.weight), g[t] @ blk.mlp.fc1.bias
        w2, b2 = torch.einsum('e,edh->dh', g[t], blk.mlp.fc2.weight), g[t] @ blk.mlp.fc2.bias
        h = x + blk.attn(blk.norm1(x))
        x = h + F.linear(F.gelu(F.linear(blk.norm2(h), w1, b1)), w2, b2)
    return x


def grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize('rate, training', [(0.0, True), (0.3, False), (1e-9, True)])
def test_outputs_and_gradients_equal_the_forward_without_dropout(rate, training):
    """Without step dropout (rate 0, or eval) and where every image runs every step (a rate so small that all are
    kept), the outputs and gradients are the plain recursion's (a reference loop)."""
    model = program_router(tiny_revit(depth=6, step_drop_rate=rate)).train(training)
    img = torch.randn(4, 3, 48, 32)
    torch.manual_seed(0)
    out = model(img)
    if rate and training:
        assert out.stats.tables['kept_steps'].all()
    out[-1].flatten(2).transpose(1, 2).square().mean().backward()
    got = grads(model)
    model.zero_grad()
    want = reference(model, img)
    torch.testing.assert_close(out[-1].flatten(2).transpose(1, 2), want[:, 1:], rtol=1e-5, atol=1e-5)
    want[:, 1:].square().mean().backward()
    torch.testing.assert_close(got, grads(model), rtol=1e-4, atol=1e-6)


def test_compiles_once_and_trains_without_recompiling():
    """torch.compile (dynamo, an eager backend) of reViT with step dropout: 3 training iterations on new images, one
    graph set at the first, no recompile after it (the labels printed a symbolic float at the second)."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    model = tiny_revit(depth=6, step_drop_rate=0.3).train()
    step = torch.compile(model, backend=backend)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    first = None
    for _ in range(3):
        loss_of(step(torch.randn(4, 3, 32, 32))).backward()
        optimizer.step()
        optimizer.zero_grad()
        first = len(graphs) if first is None else first
    assert first >= 1 and len(graphs) == first
    torch._dynamo.reset()
