"""reViT's defining properties (docs/methods/revit.md, issue 5); shapes/gradients/round trip are in test_common.py."""

import math
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from backbone_cases import program_router, tiny_revit

from mmrecvit.models import NaiveRecursiveViT, PlainViT, ReViT
from mmrecvit.models.checkpoint import load_pretrained, load_state_dict_into
from mmrecvit.models.experts import depth_coordinates, depth_grid
from mmrecvit.models.revit_fold import fold_to_plainvit
from mmrecvit.models.step_dropout import slots_per_step

TINY = dict(arch='tiny', embed_dim=32, num_heads=2, img_size=64)

pytestmark = pytest.mark.usefixtures('one_thread')


def reference_final_state(model, img):
    """reViT by docs/methods/revit.md's formulas, written out: s_t = t/(L-1), g_t = softmax(ψ(s_t)), θ̄_t = Σ g θ_e."""
    x = model.embed(img)
    L, blk, r = model.depth, model.block, model.router
    s = torch.arange(L, dtype=torch.float32)[:, None] / (L - 1)
    g = torch.softmax(r.fc2(F.silu(r.fc1(s))), dim=-1)  # (L, E)
    for t in range(L):
        w1 = torch.einsum('e,ehd->hd', g[t], blk.mlp.fc1.weight)
        b1 = torch.einsum('e,eh->h', g[t], blk.mlp.fc1.bias)
        w2 = torch.einsum('e,edh->dh', g[t], blk.mlp.fc2.weight)
        b2 = torch.einsum('e,ed->d', g[t], blk.mlp.fc2.bias)
        h = x + blk.attn(blk.norm1(x))
        x = h + F.linear(F.gelu(F.linear(blk.norm2(h), w1, b1)), w2, b2)
    return x


# ---- the model ---------------------------------------------------------------------------------
def test_small_e4_parameter_count_matches_the_paper():
    model = ReViT(arch='small', num_experts=4)
    n = sum(p.numel() for p in model.parameters())
    assert 5.685e6 < n < 5.695e6, n  # backbone ≈ 5.69M
    head = 2 * 384 + 384 * 1000 + 1000  # final LayerNorm + 1000-class linear head
    assert 6.075e6 < n + head < 6.085e6, n + head  # ≈ 6.08M, the paper's 6.1M
    assert model.depth == 12 and model.out_indices == (2, 5, 8, 11)


def test_gates_start_uniform():
    model = tiny_revit().eval()
    with torch.no_grad():
        gates = model(torch.randn(1, 3, 32, 32)).stats.tables['gates']
    assert gates.shape == (6, 3)
    torch.testing.assert_close(gates, torch.full((6, 3), 1 / 3))


@pytest.mark.parametrize('training', [False, True])
def test_forward_is_the_merged_ffn_recursion(training):
    model = program_router(tiny_revit(step_drop_rate=0.0)).train(training)
    img = torch.randn(2, 3, 48, 64)
    with torch.set_grad_enabled(training):
        final, _ = model.forward_intermediates(img, 1, output_fmt='NLC')  # after the final norm (the identity)
        torch.testing.assert_close(final, reference_final_state(model, img), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('K', range(1, 17))
def test_depth_grid_is_made_on_the_device_with_pythons_values(K):
    """The forwards' depth grid is made on the device (no upload, issue 48.2), bit for bit the float32 of Python's
    t/(K-1) that `torch.tensor` gave before; K = 1 (one kept step under step dropout) is s = 0."""
    python = depth_coordinates(K) if K > 1 else [0.0]
    assert torch.equal(depth_grid(K), torch.tensor(python, dtype=torch.float32))
    assert depth_grid(K, 'meta').device.type == 'meta'


def test_router_runs_once_per_forward_not_per_token():
    model = program_router(tiny_revit(step_drop_rate=0.0)).train()
    with mock.patch.object(model.router, 'forward', wraps=model.router.forward) as router:
        model(torch.randn(3, 3, 64, 64))
    assert router.call_count == 1
    assert router.call_args.args[0].shape == (model.depth,)  # one coordinate per depth


def test_one_expert_is_plain_weight_tying():
    revit = tiny_revit(num_experts=1).eval()
    tied = NaiveRecursiveViT(**TINY, depth=6, num_blocks=1).eval()
    sd = {}
    for k, v in revit.state_dict().items():
        if k.startswith('block.mlp.'):
            sd['blocks.0.' + k[len('block.') :]] = v[0]
        elif k.startswith('block.'):
            sd['blocks.0.' + k[len('block.') :]] = v
        elif not k.startswith('router.'):
            sd[k] = v
    tied.load_state_dict(sd, strict=True)
    x = torch.randn(2, 3, 64, 48)
    with torch.no_grad():
        for a, b in zip(revit(x), tied(x)):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert revit.train()(x).stats.aux_losses == {}  # no auxiliary losses for E=1


# ---- auxiliary losses --------------------------------------------------------------------------
def test_aux_losses_follow_the_spec_formulas():
    model = program_router(tiny_revit(step_drop_rate=0.0)).train()
    losses = model(torch.randn(2, 3, 32, 32)).stats.aux_losses
    assert sorted(losses) == ['loss_revit_balance', 'loss_revit_diversity', 'loss_revit_z']
    with torch.no_grad():
        r = model.router
        s = torch.arange(6.0)[:, None] / 5
        z = r.fc2(F.silu(r.fc1(s)))
        usage = z.softmax(-1).mean(0)
        balance = 1 - (-(usage * usage.log()).sum()) / math.log(3)
        zloss = z.logsumexp(-1).square().mean()
        w1 = model.block.mlp.fc1.weight.flatten(1)
        cos = [F.cosine_similarity(w1[a], w1[b], dim=0) for a in range(3) for b in range(3) if a != b]
        diversity = torch.stack(cos).mean()
    torch.testing.assert_close(losses['loss_revit_balance'], 1e-2 * balance)
    torch.testing.assert_close(losses['loss_revit_z'], 1e-3 * zloss)
    torch.testing.assert_close(losses['loss_revit_diversity'], 1e-3 * diversity)
    sum(losses.values()).backward()
    assert model.router.fc2.weight.grad.abs().sum() > 0
    assert model.block.mlp.fc1.weight.grad.abs().sum() > 0


def test_aux_loss_weights_are_configurable_and_train_only():
    model = tiny_revit(balance_loss_weight=0.5, z_loss_weight=0.0, step_drop_rate=0.0).train()
    losses = model(torch.randn(1, 3, 32, 32)).stats.aux_losses
    assert sorted(losses) == ['loss_revit_balance', 'loss_revit_diversity']
    torch.testing.assert_close(losses['loss_revit_balance'], torch.tensor(0.0))  # uniform gates at init
    assert all(v.requires_grad for v in losses.values())
    with torch.no_grad():
        stats = model.eval()(torch.randn(1, 3, 32, 32)).stats
    assert stats.aux_losses == {}
    assert sorted(stats.scalars) == ['revit_gate_e0', 'revit_gate_e1', 'revit_gate_e2']


# ---- elastic depth -----------------------------------------------------------------------------
def test_step_dropout_runs_each_image_as_a_shorter_revit():
    """Kept steps are renumbered with s_k = k/(K-1): image b computes exactly reViT at depth K_b,
    including the four outputs at the same relative depth."""
    model = program_router(tiny_revit(depth=8, step_drop_rate=0.5, step_drop_groups=6))  # every image its own
    img = torch.randn(6, 3, 48, 48)
    torch.manual_seed(5)
    outs = model.train()(img)
    kept = outs.stats.tables['kept_steps']
    K = kept.sum(1)
    assert kept.shape == (6, 8) and (K >= 2).all() and (K < 8).any() and len(set(K.tolist())) > 1
    n, ran = 10, slots_per_step(6, 8, 0.5) / 6  # tokens: 3x3 patches + CLS; each step runs C of the 6 images
    for t, work in enumerate(outs.stats.blocks):
        assert work.queries == pytest.approx(n * ran) and kept[:, t].float().mean() <= ran
    model.eval()
    with torch.no_grad():
        for b in range(6):
            model.depth = int(K[b])
            for got, want in zip(outs, model(img[b : b + 1])):
                torch.testing.assert_close(got[b : b + 1], want, rtol=1e-5, atol=1e-5)


def test_step_dropout_rate_and_at_least_two_steps():
    model = tiny_revit(depth=12)
    torch.manual_seed(0)
    keep = model.sample_kept_steps(4000)
    assert 0.68 < keep.float().mean() < 0.72  # p = 0.3
    model.step_drop_rate = 0.95
    keep = model.sample_kept_steps(2000)
    assert (keep.sum(1) >= 2).all() and (keep.sum(1) == 2).float().mean() > 0.5


def test_depth_is_elastic_at_inference():
    trained = program_router(tiny_revit(depth=6)).eval()
    deeper = tiny_revit(depth=9).eval()
    deeper.load_state_dict(trained.state_dict(), strict=True)  # saved keys do not depend on L
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        outs = deeper(x)
        g9 = outs.stats.tables['gates']
        g6 = trained(x).stats.tables['gates']
    assert len(outs) == 4 and g9.shape == (9, 3) and len(outs.stats.blocks) == 9
    torch.testing.assert_close(g9[[0, -1]], g6[[0, -1]])  # same program, resampled grid
    assert not torch.allclose(g9[1], g6[1])
    trained.depth = 9  # the setter: same as building with depth=9
    with torch.no_grad():
        for a, b in zip(trained(x), outs):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize(
    'depth, steps',
    [(12, (2, 5, 8, 11)), (8, (1, 3, 5, 7)), (10, (1, 4, 6, 9)), (16, (3, 7, 11, 15)), (2, (0, 0, 0, 1))],
)
def test_outputs_are_named_by_normalised_depth(depth, steps):
    model = tiny_revit(depth=depth)
    assert model.out_indices == steps
    assert len(model.drop_path_rates) == depth
    assert tiny_revit(depth=depth, out_depths=[0.5, 1.0]).out_indices == (steps[1], steps[3])


@pytest.mark.parametrize(
    'kwargs, exc, words',
    [
        (dict(num_experts=0), ValueError, ['num_experts', '[1, inf]']),
        (dict(depth=1), ValueError, ['depth', '[2, inf]']),
        (dict(out_depths=[0.0, 1.0]), ValueError, ['out_depths', '(0.0, 1.0]']),
        (dict(out_depths=[0.5, 1.5]), ValueError, ['out_depths', '(0.0, 1.0]']),
        (dict(out_depths=0.5), TypeError, ['out_depths', 'list or tuple']),
        (dict(step_drop_rate=1.0), ValueError, ['step_drop_rate', '[0.0, 1.0)']),
        (dict(shared_init='first'), ValueError, ['shared_init', 'average', 'middle']),
        (dict(z_loss_weight=-1.0), ValueError, ['z_loss_weight']),
        (dict(router_temperature=0), ValueError, ['router_temperature']),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, exc, words):
    with pytest.raises(exc) as info:
        tiny_revit(**kwargs)
    for w in words:
        assert w in str(info.value), f'{w!r} not in error: {info.value}'


def test_depth_setter_validates():
    model = tiny_revit()
    with pytest.raises(ValueError, match=r'depth must be an int in \[2, inf\]'):
        model.depth = 1


# ---- fold to dense -----------------------------------------------------------------------------
@pytest.mark.parametrize('depth, extra', [(6, {}), (4, {}), (9, dict(init_values=0.5, with_cls_token=False))])
def test_fold_to_plainvit_gives_the_same_outputs(depth, extra):
    revit = program_router(tiny_revit(depth=6, **extra)).eval()
    dense = fold_to_plainvit(revit, depth)
    assert isinstance(dense, PlainViT) and dense.depth == depth and revit.depth == 6
    assert dense.out_indices == tiny_revit(depth=depth).out_indices
    revit.depth = depth
    x = torch.randn(2, 3, 48, 80)
    with torch.no_grad():
        for a, b in zip(revit(x), dense(x)):
            torch.testing.assert_close(b, a, rtol=0, atol=1e-5)


@pytest.mark.parametrize('step_drop_rate', [0.0, 0.5])
@pytest.mark.parametrize('with_cp', [False, True])
def test_training_merges_all_steps_at_once_but_per_application_under_with_cp(with_cp, step_drop_rate):
    """The experts are read once per training forward; with `with_cp` each checkpointed application merges its own
    (no merged weights kept), with the same outputs and gradients (test_common.py's with_cp test); under step dropout
    each step's block call merges the FFNs of its groups (docs/methods/revit.md)."""
    torch.manual_seed(0)
    model = program_router(tiny_revit(step_drop_rate=step_drop_rate, with_cp=with_cp)).train()
    run = mock.Mock(wraps=model.block_runner())  # every block application of a forward goes through it
    with (
        mock.patch.object(model.block.mlp, 'merge', wraps=model.block.mlp.merge) as merge,
        mock.patch.object(model, 'block_runner', return_value=run),
    ):
        y = model(torch.randn(4, 3, 32, 32))
    assert run.call_count >= model.depth
    assert merge.call_count == (run.call_count if with_cp or step_drop_rate else 1)  # step dropout: per step
    rows = sum(c.args[0].shape[:-1].numel() for c in merge.call_args_list)  # gate rows (..., E)
    counted = next(w.macs for w in y.stats.extra if w.name == 'block.mlp (expert merge)')
    assert counted == pytest.approx(rows * model.block.mlp.merge_macs() / 4)  # what ran, per image


# ---- eval weight cache -------------------------------------------------------------------------
def test_eval_cache_merges_once_and_follows_parameter_changes():
    model = program_router(tiny_revit(step_drop_rate=0.0))
    other = program_router(tiny_revit(), seed=7)
    x = torch.randn(1, 3, 32, 32)
    with mock.patch.object(model.block.mlp, 'merge', wraps=model.block.mlp.merge) as merge:
        model.eval()
        with torch.no_grad():
            first = model(x)
            model(x)
        with torch.inference_mode():
            model(x)
        assert merge.call_count == 1  # three eval forwards, one merge of the L FFNs
        again = model(x)  # autograd on: fresh merge with a graph, not cached
        assert merge.call_count == 2
        for a, b in zip(first, again):
            torch.testing.assert_close(a, b, rtol=0, atol=0)

        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.train()
        sum(o.square().mean() for o in model(x)).backward()
        trained_merges = merge.call_count
        assert trained_merges == 2 + 1  # training merges every step in one product, never cached
        opt.step()
        model.eval()
        with torch.no_grad():
            stepped = model(x)
            model(x)
        assert merge.call_count == trained_merges + 1  # the optimizer step invalidated the cache
        assert not torch.allclose(stepped[-1], first[-1])

        model.load_state_dict(other.state_dict())
        with torch.no_grad():
            loaded = model(x)
            other.eval()
            want = other(x)
        assert merge.call_count == trained_merges + 2
        for a, b in zip(loaded, want):
            torch.testing.assert_close(a, b, rtol=0, atol=0)

        model.depth = 4
        with torch.no_grad():
            out = model(x)
            assert len(out) == 4 and out.stats.tables['gates'].shape == (4, 3)
        model.double()
        with torch.no_grad():
            assert model(x.double())[0].dtype == torch.float64
        assert merge.call_count == trained_merges + 4

        model.load_state_dict(other.double().state_dict(), assign=True)  # new parameters: new identities
        with torch.no_grad():
            model(x.double())
        assert merge.call_count == trained_merges + 5
        trained_merges += 1

        model.block.mlp.fc2.bias.data.add_(1.0)  # invisible to version counters ...
        model.invalidate_cache()  # ... hence the explicit hook
        with torch.no_grad():
            model(x.double())
        assert merge.call_count == trained_merges + 5


# ---- checkpoints -------------------------------------------------------------------------------
def timm_checkpoint(path, depth=4):
    src = PlainViT(**TINY, depth=depth)
    sd = {
        **src.state_dict(),
        'norm.weight': torch.ones(32),
        'norm.bias': torch.zeros(32),
        'head.weight': torch.randn(10, 32),
        'head.bias': torch.zeros(10),
    }
    torch.save({'model': sd}, path)
    return sd


@pytest.mark.parametrize('shared_init', ['average', 'middle'])
def test_shared_init_from_timm(tmp_path, shared_init):
    sd = timm_checkpoint(tmp_path / 'deit.pth')
    model = tiny_revit(depth=4, num_experts=3, shared_init=shared_init, router_init='uniform')
    load_pretrained(model, str(tmp_path / 'deit.pth'))
    own = model.state_dict()

    def mean(key, blocks):
        return torch.stack([sd[f'blocks.{i}.{key}'] for i in blocks]).mean(0)

    shared = [0, 1, 2, 3] if shared_init == 'average' else [2]
    for key in ('norm1.weight', 'attn.qkv.weight', 'attn.proj.bias', 'norm2.bias'):
        torch.testing.assert_close(own[f'block.{key}'], mean(key, shared))
    for e, group in enumerate([[0], [1], [2, 3]]):  # E=3 contiguous groups of 4 blocks
        for key in ('fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias'):
            torch.testing.assert_close(own[f'block.mlp.{key}'][e], mean(f'mlp.{key}', group))
    assert (own['router.fc2.weight'] == 0).all()  # 'uniform': docs/methods/revit.md's zero output layer
    torch.testing.assert_close(own['pos_embed'], sd['pos_embed'])


def test_revit_programmed_gates_select_the_expert_of_their_depth(deit):
    _, sd = deit
    for depth in (12, 16):  # the programme also holds on another grid (elastic depth)
        model = ReViT(**TINY, num_experts=4)
        load_state_dict_into(model, sd, 'deit')
        model.depth = depth
        gates, _, _ = model.merged_ffns()
        assert gates.argmax(1).tolist() == [t * 4 // depth for t in range(depth)]
        if depth == 12:
            torch.testing.assert_close(gates.max(1).values, torch.full((12,), 0.97), atol=1e-4, rtol=0)
    uniform = ReViT(**TINY, num_experts=4, router_init='uniform')
    load_state_dict_into(uniform, sd, 'deit')
    assert torch.allclose(uniform.merged_ffns()[0], torch.full((12, 4), 0.25))


def test_step_dropout_assembles_only_the_layers_the_forward_reads(monkeypatch):
    """Each image reads a layer at its own kept step, so with step dropout a layer's state is assembled image by image:
    only for the layers the forward reads (`Step.read`), not for every layer up to the last one read."""
    model = tiny_revit(step_drop_rate=0.5).train()
    yielded, iter_layers = [], model.iter_layers

    def spy(*args):
        for layer, state in iter_layers(*args):
            yielded.append(layer)
            yield layer, state

    monkeypatch.setattr(model, 'iter_layers', spy)
    torch.manual_seed(0)
    model.forward_intermediates(torch.randn(4, 3, 32, 32), indices=[1, 3], stop_early=True)
    assert yielded == [1, 3]
