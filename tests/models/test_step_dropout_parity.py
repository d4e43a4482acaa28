"""reViT's step dropout written for speed (issue 48.1, docs/methods/revit.md "Elastic depth in training"): each step's
results written in place into the state (a discarded slot's into a spare row), the layers read gathered once after
the last step, and the grouped FFN product's weight gradients in the weights' layout (`experts.GroupedLinear`) compute
what the first version computed (kept here as `reference_iter_dropped`: `torch.where` per step and per read layer, an
out-of-place index copy, `torch.baddbmm` against transposed weights): the same draw, the maps of every layer, the
statistics and the gradients of the input and of every parameter, side by side in one run."""

import types

import pytest
import torch
import torch.nn.functional as F
from backbone_cases import program_router, tiny_revit
from torch.utils._python_dispatch import TorchDispatchMode

from mmrecvit.models.experts import GroupedLinear, depth_grid
from mmrecvit.models.numerics import finite, full_precision
from mmrecvit.models.step_dropout import logit_labels, num_groups, per_image, sample_steps

pytestmark = pytest.mark.usefixtures('one_thread')

CASES = {
    'plain': dict(),
    'drop-path-with-cp': dict(drop_path_rate=0.2, with_cp=True),
    'windows-relpos': dict(img_size=64, window_size=2, use_rel_pos=True, drop_path_rate=0.1),
    'every-image-its-own': dict(step_drop_groups=64),
}


def reference_iter_dropped(self, x, steps, stats):
    """The first version of `ReViT._iter_dropped` (before the in-place state), statistics included."""
    B, L = x.shape[0], self._depth
    G = num_groups(B, self.step_drop_groups)
    g, draw = B // G, sample_steps(G, L, self.step_drop_rate, x.device)
    C = draw.slots.shape[1]
    coords = torch.cat([depth_grid(L, x.device), draw.coords.flatten()])
    logits = finite('router logits', logit_labels(L, C), full_precision(self.router, coords), self.router)
    gates = self.gates_of(logits)
    rows_gates = gates[L:].unflatten(0, (L, C))
    run, schedule = self.block_runner(), self.steps(None, stats.grid)
    layers = [step.layer for step in steps if step.read]
    reads = {i: (draw.reads(i, L), x) for i in layers if i != L - 1}
    groups = x.unflatten(0, (G, g))
    for step in schedule:
        t, slots = step.index, draw.slots[step.index]
        rows = groups.index_select(0, slots).flatten(0, 1)
        out = run(self.block, rows, drop_path_rate=step.drop_path_rate, layout=step.layout, expert_gates=rows_gates[t])
        out = torch.where(per_image(draw.slot_kept[t], g)[:, None, None], out, rows)
        groups = groups.index_copy(0, slots, out.unflatten(0, (C, g)))
        x = groups.flatten(0, 1)
        for i, (hit, state) in reads.items():
            reads[i] = (hit, torch.where(per_image(hit[t], g)[:, None, None], x, state))
    for i in layers:
        yield i, x if i == L - 1 else reads[i][1]
    stats.setting = (C / G,) * L
    kept = per_image(draw.kept, g).T
    stats.tables['kept_steps'] = kept
    stats.scalars['revit_kept_steps'] = kept.sum(1).float().mean()
    weights = torch.cat([torch.zeros(L, device=x.device), draw.slot_kept.flatten().float()])
    self._statistics(stats, gates, logits, L, weights, len(coords), len(coords) - L, B)


def reference_mlp_forward(self, x, ffn=None, expert_gates=None):
    """The first version of `ExpertMlp`'s grouped product: `baddbmm` against the transposed merged weights."""
    ffn = self.merge(expert_gates) if ffn is None else ffn
    h = x.reshape(ffn.fc1_weight.shape[0], -1, x.shape[-1])
    h = self.act(torch.baddbmm(ffn.fc1_bias.unsqueeze(1), h, ffn.fc1_weight.transpose(1, 2)))
    return torch.baddbmm(ffn.fc2_bias.unsqueeze(1), h, ffn.fc2_weight.transpose(1, 2)).reshape(x.shape)


def train_step(model, images, layers):
    """Maps of `layers`, the statistics and the gradients of one training step (the same draws: the same seed)."""
    model.zero_grad(set_to_none=True)
    x = images.clone().requires_grad_(True)
    torch.manual_seed(1)
    states, stats = model.forward_intermediates(x, layers, intermediates_only=True, return_stats=True)
    loss = sum((s * torch.linspace(-1, 1, s.numel()).view(s.shape)).sum() for s in states)
    (loss + sum(stats.aux_losses.values())).backward()
    grads = {'input': x.grad, **{n: p.grad for n, p in model.named_parameters() if p.grad is not None}}
    return states, stats, grads


@pytest.mark.parametrize('case', CASES)
def test_the_fast_step_dropout_computes_what_the_first_version_computed(case):
    torch.manual_seed(0)
    model = program_router(tiny_revit(depth=8, step_drop_rate=0.3, **CASES[case])).train()
    images = torch.randn(16, 3, 64 if 'img_size' in CASES[case] else 48, 48)
    layers = [1, 2, 4, 5, 7]  # reads before the last step (one group may read two of them at one step) and the last
    new = train_step(model, images, layers)
    model._iter_dropped = types.MethodType(reference_iter_dropped, model)
    model.block.mlp.forward = types.MethodType(reference_mlp_forward, model.block.mlp)
    old = train_step(model, images, layers)
    assert not new[1].tables['kept_steps'].all()  # steps were dropped
    for name in ('kept_steps', 'gates'):
        torch.testing.assert_close(new[1].tables[name], old[1].tables[name], rtol=0, atol=0, msg=name)
    torch.testing.assert_close(new[1].scalars, old[1].scalars, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(new[1].aux_losses, old[1].aux_losses, rtol=1e-6, atol=1e-7)
    for i, (a, b) in enumerate(zip(new[0], old[0])):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=f'layer {layers[i]}')
    assert new[2].keys() == old[2].keys()
    for name, grad in old[2].items():
        torch.testing.assert_close(new[2][name], grad, rtol=1e-4, atol=1e-5 * float(grad.abs().max()), msg=name)


def test_the_grouped_product_is_f_linear_per_group_with_gradients_in_the_weights_layout():
    """`GroupedLinear`: group j is `F.linear(x[j], weight[j], bias[j])`, gradients included (double backward too);
    the weights' gradient arrives contiguous in their (G, out, in) layout, so the merge's backward reads it as it is
    (`baddbmm` against `weight.mT` hands it over transposed: a copy of every merged weight at every step)."""
    x, w, b = torch.randn(3, 5, 4), torch.randn(3, 6, 4), torch.randn(3, 6)
    leaves = [t.clone().requires_grad_(True) for t in (x, w, b)]
    seen = []
    leaves[1].register_hook(lambda grad: seen.append(grad.is_contiguous()))
    out = GroupedLinear.apply(*leaves)
    want = torch.stack([F.linear(x[j], w[j], b[j]) for j in range(3)])
    torch.testing.assert_close(out, want)
    (gx, gw, gb) = torch.autograd.grad(out.square().sum(), leaves, create_graph=True)
    ref = [t.clone().requires_grad_(True) for t in (x, w, b)]
    rgx, rgw, rgb = torch.autograd.grad(
        torch.stack([F.linear(ref[0][j], ref[1][j], ref[2][j]) for j in range(3)]).square().sum(),
        ref,
        create_graph=True,
    )
    for got, want_grad in ((gx, rgx), (gw, rgw), (gb, rgb)):
        torch.testing.assert_close(got, want_grad)
    second = torch.autograd.grad(gw.sum(), leaves[0])[0]
    torch.testing.assert_close(second, torch.autograd.grad(rgw.sum(), ref[0])[0])
    assert seen == [True]


def test_the_grouped_product_follows_autocast_as_baddbmm_does():
    """Under autocast (bf16 on CPU) the grouped product and its backward run in bf16 as `torch.baddbmm` does, and the
    gradients reach fp32 leaves in fp32, with the values of the plain `baddbmm` path."""
    x, w, b = torch.randn(2, 8, 16), torch.randn(2, 12, 16), torch.randn(2, 12)
    got = [t.clone().requires_grad_(True) for t in (x, w, b)]
    ref = [t.clone().requires_grad_(True) for t in (x, w, b)]
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = GroupedLinear.apply(*got)
        want = torch.baddbmm(ref[2].unsqueeze(1), ref[0], ref[1].transpose(1, 2))
    assert out.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    out.float().square().sum().backward()
    want.float().square().sum().backward()
    for a, r in zip(got, ref):
        assert a.grad.dtype == r.grad.dtype == torch.float32
        torch.testing.assert_close(a.grad, r.grad, rtol=0, atol=0)


class FreshStateSized(TorchDispatchMode):
    """Counts the ops outside the block calls that allocate a tensor of at least the whole state's size."""

    def __init__(self, size):
        super().__init__()
        self.size, self.inside, self.count = size, 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        fresh = not func._schema.name.endswith('_') and not func.is_view and func._schema.name != 'aten::detach'
        if not self.inside and fresh and isinstance(out, torch.Tensor) and out.numel() >= self.size:
            self.count += 1
        return out


def fresh_state_sized(depth, reference=False):
    model = tiny_revit(depth=depth, step_drop_rate=0.3).train()
    if reference:
        model._iter_dropped = types.MethodType(reference_iter_dropped, model)
    x = torch.randn(16, 3, 32, 32)
    mode = FreshStateSized(x.shape[0] * (4 + 1) * model.embed_dim)
    model.block.register_forward_pre_hook(lambda *_: setattr(mode, 'inside', mode.inside + 1))
    model.block.register_forward_hook(lambda *_: setattr(mode, 'inside', mode.inside - 1))
    with mode:
        model(x)
    return mode.count


def test_the_state_is_not_copied_at_every_step():
    """Outside the block calls a training forward with step dropout allocates a state-sized tensor a fixed number of
    times whatever the depth (the embedding, the state with its spare rows, every step's results for the layers
    read, their gather), not at every step as the first version did (an index copy and one `torch.where` per read
    layer per step)."""
    assert fresh_state_sized(6) == fresh_state_sized(12)
    assert fresh_state_sized(12, reference=True) - fresh_state_sized(6, reference=True) >= 6 * 2
