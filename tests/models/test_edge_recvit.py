"""Edge-RecViT (docs/methods/edge_recvit.md): sizes, fast path == masked reference, gates, losses, knobs, timm map."""

import pytest
import torch
import torch.nn.functional as F
from backbone_cases import token_states
from timm.models.vision_transformer import VisionTransformer

from mmrecvit.benchmark import force_mean_depth
from mmrecvit.models import BACKBONES, EdgeRecViT
from mmrecvit.models.checkpoint import load_pretrained, load_state_dict_into
from mmrecvit.models.edge_recvit import still_active_gates

pytestmark = pytest.mark.usefixtures('one_thread')

TINY = dict(arch='tiny', embed_dim=32, num_heads=2, img_size=64)  # L = 12, as the paper

ALL_STEPS = list(range(12))


def build(forced_mean_depth=None, forced_depth_seed=0, **kw):
    """A tiny Edge-RecViT; `forced_mean_depth`: run a fixed, seeded depth pattern of that mean per
    image instead of the ranker's choice (the benchmark harness's `depth_pattern`)."""
    torch.manual_seed(0)
    model = EdgeRecViT(**{**TINY, **kw}).eval()
    if forced_mean_depth is not None:
        force_mean_depth(model, forced_mean_depth, forced_depth_seed)
    return model


def run_both(model, images):
    """States after every step from the engine and from the masked reference (same weights)."""
    with torch.no_grad():
        model.execution = 'adaptive'
        fast, stats = token_states(model, images, ALL_STEPS)
        model.execution = 'masked'
        ref, _ = token_states(model, images, ALL_STEPS)
    model.execution = 'adaptive'
    return fast, ref, stats


@pytest.mark.parametrize('arch, millions', [('tiny', 1.599), ('small', 6.000), ('base', 23.206)])
def test_parameter_counts_match_the_paper(arch, millions):
    model = EdgeRecViT(arch=arch)
    assert round(sum(p.numel() for p in model.parameters()) / 1e6, 3) == millions
    assert len(model.blocks) == 3 and model.schedule == [0] + [1] * 10 + [2]


@pytest.mark.parametrize(
    'case',
    [
        dict(forced_mean_depth=8.3, forced_depth_seed=0),
        dict(forced_mean_depth=3.5, forced_depth_seed=1),
        dict(forced_mean_depth=6.0, forced_depth_seed=2, with_cls_token=False),
        dict(ranker_scale=60.0),  # the ranker's own (spread) choices
        dict(ranker_scale=60.0, max_depth=7, depth_shift=-1),
    ],
)
def test_fast_path_equals_masked_reference(case):
    case = dict(case)
    scale = case.pop('ranker_scale', None)
    model = build(**case)
    if scale:
        with torch.no_grad():
            model.ranker.fc2.weight.mul_(scale)
    images = torch.randn(3, 3, 80, 112)  # 5 x 7 patches, 3 images
    fast, ref, stats = run_both(model, images)
    for a, b in zip(fast, ref):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    depth = stats.token_maps['depth']
    counts = [(depth[b] > 2).sum().item() for b in range(3)]
    assert len(set(counts)) > 1, 'the case must have different active counts per image'
    assert 1 < depth.float().mean() < 12
    # the engine really skipped work: queries per step are the active tokens, not N
    N = 35 + model.num_prefix_tokens
    queries = [s.queries for s in stats.blocks]
    expected = [((depth > s).sum().item() + 3 * model.num_prefix_tokens * (s < model.cls_depth)) / 3 for s in range(12)]
    assert queries == pytest.approx(expected) and sum(queries) < 12 * N


def test_cls_always_runs_full_depth():
    model = build(forced_mean_depth=1.0)  # every patch token stops after the head
    with torch.no_grad():
        states, stats = token_states(model, torch.randn(2, 3, 64, 64), ALL_STEPS)
    assert [s.queries for s in stats.blocks] == [17] + [1] * 11  # CLS alone after step 0
    assert stats.blocks[-1].new_kv == 16  # the tail needs the frozen tokens' keys/values
    for s in range(1, 11):  # patch tokens frozen, CLS moves (the last state is normed, skip it)
        assert torch.equal(states[s][:, 1:], states[0][:, 1:])
        assert not torch.allclose(states[s][:, 0], states[s - 1][:, 0])
    assert stats.token_maps['depth'].shape == (2, 4, 4)  # CLS is not in the depth map (on the 4 x 4 grid)


def test_still_active_gate_formula():
    d = torch.tensor([1, 4, 12])
    y = F.one_hot(d - 1, 12).float()
    expected = (torch.arange(12)[None] < d[:, None]).float()
    assert torch.equal(still_active_gates(y), expected)


def test_training_uses_gumbel_straight_through_to_the_ranker():
    model = build().train()
    outs = model(torch.randn(2, 3, 64, 64))
    sum(o.square().mean() for o in outs).backward()  # no aux loss: the gradient comes through a_s
    assert model.ranker.fc2.weight.grad.abs().sum() > 0
    assert outs.stats.blocks[0].queries == 17  # the reference path: every token at every step
    depths = []
    for seed in (5, 6):
        torch.manual_seed(seed)
        depths.append(model(torch.ones(1, 3, 64, 64)).stats.token_maps['depth'])
    assert not torch.equal(*depths)  # depths are sampled in training


def test_aux_losses_are_finite_and_weighted():
    model = build(stb_loss_weight=2e-3, du_loss_weight=0.5)
    images = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        stats = model(images).stats
        tokens = model.embed(images)
        z = model.ranker(tokens[:, 1:])
    losses = stats.aux_losses
    assert sorted(losses) == ['loss_du', 'loss_stb'] and all(torch.isfinite(v) for v in losses.values())
    stb = torch.logsumexp(z, -1).square().mean()
    depth = z.argmax(-1)
    du = 12 * (z.softmax(-1).mean((0, 1)) * F.one_hot(depth, 12).float().mean((0, 1))).sum()
    torch.testing.assert_close(losses['loss_stb'], 2e-3 * stb)
    torch.testing.assert_close(losses['loss_du'], 0.5 * du)
    scalars = stats.scalars
    hist = torch.stack([scalars[f'depth/d{level}'] for level in range(1, 13)])
    assert hist.sum().item() == pytest.approx(1.0)
    assert scalars['depth/mean'].item() == pytest.approx((depth + 1).float().mean().item())
    assert stats.token_maps['depth'].shape == (2, 4, 6)


def test_inference_knobs_change_processed_tokens():
    images = torch.randn(2, 3, 64, 64)
    work = {}
    for name, kw in dict(
        default={}, capped=dict(max_depth=4), shifted=dict(depth_shift=-3), forced=dict(forced_mean_depth=8.3)
    ).items():
        model = build(**kw)
        with torch.no_grad():
            stats = model(images).stats
        work[name] = [s.queries for s in stats.blocks]
        if name == 'forced':
            assert stats.scalars['depth/mean'].item() == pytest.approx(8.3, abs=1 / 16)
    assert work['capped'][4:] == [0] * 8 and max(work['capped'][:4]) > 0
    assert sum(work['shifted']) < sum(work['default'])
    # knobs are plain attributes too (what --cfg-options sets, or a user on a built model)
    model = build()
    model.max_depth = 2
    with torch.no_grad():
        stats = model(images).stats
    assert [s.queries for s in stats.blocks][2:] == [0] * 10


def test_flops_count_the_tokens_really_processed():
    images = torch.randn(1, 3, 64, 64)  # 16 patches + CLS
    flops = {}
    for mean in (12, 6.0):
        model = build(forced_mean_depth=mean)
        with torch.no_grad():
            flops[mean] = model(images).stats.flops
    D, L = 32, 12
    fixed = 2 * 16 * (3 * 16 * 16 * D + D * 2 * D + 2 * D * L)  # patch embedding + ranker
    dense_step = 2 * (17 * 12 * D * D + 2 * 17 * 17 * D)  # qkv, proj, MLP + q.k, attn.v
    assert flops[12] == pytest.approx(fixed + L * dense_step)
    assert flops[6.0] < 0.7 * flops[12]


def test_timm_key_map(tmp_path):
    torch.manual_seed(0)
    ref = VisionTransformer(img_size=64, patch_size=16, embed_dim=32, depth=12, num_heads=2, num_classes=5).eval()
    path = str(tmp_path / 'deit.pth')
    torch.save({'model': ref.state_dict()}, path)
    for shared in (6, 3):
        model = build(shared_init_block=shared, forced_mean_depth=12, final_norm=False)
        ranker = {k: v.clone() for k, v in model.ranker.state_dict().items()}
        load_pretrained(model, path)
        sd = model.state_dict()
        for ours, theirs in (('blocks.0', 'blocks.0'), ('blocks.1', f'blocks.{shared}'), ('blocks.2', 'blocks.11')):
            for k in ref.blocks[0].state_dict():
                assert torch.equal(sd[f'{ours}.{k}'], ref.state_dict()[f'{theirs}.{k}']), (ours, k)
        assert all(torch.equal(v, model.ranker.state_dict()[k]) for k, v in ranker.items())  # kept fresh
        # at full depth the model is timm's blocks in the order head, shared x 10, tail
        x = torch.randn(1, 3, 64, 64)
        with torch.no_grad():
            ours_out = token_states(model, x, [11])[0][0]
            h = ref._pos_embed(ref.patch_embed(x))
            for i in [0] + [shared] * 10 + [11]:
                h = ref.blocks[i](h)
        torch.testing.assert_close(ours_out, h, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match='shared_init_block=20'):
        load_pretrained(build(shared_init_block=20), path)


@pytest.mark.parametrize(
    'kwargs, exc, words',
    [
        (dict(depth=2), ValueError, ['depth', 'at least 3']),
        (dict(max_depth=13), ValueError, ['max_depth', '12']),
        (dict(max_depth=2.5), TypeError, ['max_depth']),
        (dict(depth_shift=12), ValueError, ['depth_shift']),
        (dict(execution='fast'), ValueError, ['execution', 'adaptive', 'masked']),
        (dict(shared_init_block=-1), ValueError, ['shared_init_block']),
        (dict(gumbel_tau=0.0), ValueError, ['gumbel_tau']),
        (dict(stb_loss_weight=-1.0), ValueError, ['stb_loss_weight']),
        (dict(du_loss_weight='0.1'), TypeError, ['du_loss_weight']),
        (dict(final_norm=1), TypeError, ['final_norm']),
    ],
)
def test_bad_arguments(kwargs, exc, words):
    with pytest.raises(exc) as info:
        build(**kwargs)
    for w in words:
        assert w in str(info.value), f'{w!r} not in error: {info.value}'


@pytest.mark.parametrize('name, value', [('execution', 'sparse'), ('max_depth', 20), ('depth_shift', -12)])
def test_bad_knob_attribute_is_caught_at_forward(name, value):
    model = build()
    setattr(model, name, value)
    with pytest.raises(ValueError, match=name):
        model(torch.randn(1, 3, 32, 32))


def test_autocast_runs_the_engine():
    model = build(forced_mean_depth=7.0)
    images = torch.randn(2, 3, 64, 96)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        fast = model(images)
        model.execution = 'masked'
        ref = model(images)
    for a, b in zip(fast, ref):
        torch.testing.assert_close(a.float(), b.float(), atol=2e-2, rtol=2e-2)


def test_edge_recvit_takes_deits_final_norm(deit):
    vit, sd = deit
    sd = {**sd, 'norm.weight': torch.rand(32) + 0.5, 'norm.bias': torch.randn(32)}
    model = EdgeRecViT(**TINY)
    load_state_dict_into(model, sd, 'deit')
    assert torch.equal(model.norm.weight, sd['norm.weight']) and torch.equal(model.norm.bias, sd['norm.bias'])
    plain = BACKBONES['PlainViT'](**TINY)  # a backbone without a final norm still drops it
    load_state_dict_into(plain, sd, 'deit')


# ---- training and test agree ---------------------------------------------------------------------------------
def test_edge_balance_loss_uses_the_argmax_depths():
    """DU = L sum_l E_l A_l with A_l over the argmax depths (what eval runs), not the Gumbel samples."""
    model = EdgeRecViT(**TINY, depth=5).train()
    with torch.no_grad():
        model.ranker.fc2.weight.mul_(30.0)  # spread choices: sampled and argmax depths differ
    x = torch.randn(2, 3, 64, 64)
    torch.manual_seed(3)
    stats = model(x).stats
    tokens = model.embed(x)[:, 1:]
    probs = model.ranker(tokens).softmax(-1)
    argmax = probs.argmax(-1) + 1
    expected = 5 * (probs.mean((0, 1)) * F.one_hot(argmax - 1, 5).float().mean((0, 1))).sum()
    torch.testing.assert_close(stats.aux_losses['loss_du'], model.du_loss_weight * expected)
    assert not torch.equal(stats.token_maps['depth'], argmax)  # the forward ran sampled depths
    hist = [float(stats.scalars[f'depth/argmax_d{d}']) for d in range(1, 6)]
    assert hist == pytest.approx([float((argmax == d).float().mean()) for d in range(1, 6)])
    assert 'depth/d1' in stats.scalars and 'depth/argmax_mean' in stats.scalars


def test_edge_ranker_and_noise_are_fp32_under_autocast():
    model = EdgeRecViT(**TINY, depth=5).train()
    seen = {}
    model.ranker.register_forward_hook(lambda m, a, out: seen.update(dtype=out.dtype, input=a[0].dtype))
    with torch.autocast('cpu', dtype=torch.bfloat16):
        outs = model(torch.randn(1, 3, 64, 64))
    assert seen == dict(dtype=torch.float32, input=torch.float32)
    assert outs[-1].dtype == torch.bfloat16 or outs[-1].dtype == torch.float32


@pytest.mark.parametrize(
    'options', [dict(frozen_kv=False), dict(tail_on_all=True), dict(frozen_kv=False, tail_on_all=True)]
)
def test_edge_switches_engine_equals_masked_reference(options):
    model = EdgeRecViT(**TINY, **options).eval()
    force_mean_depth(model, 5.0, 3)
    x = torch.randn(3, 3, 80, 112)
    with torch.no_grad():
        model.execution = 'adaptive'
        fast, stats = token_states(model, x, range(12))
        depth = stats.token_maps['depth']
        model.execution = 'masked'
        ref, _ = token_states(model, x, range(12))
    for a, b in zip(fast, ref):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    early = torch.cat([torch.zeros(3, 1, dtype=torch.bool), depth.flatten(1) < 12], 1)  # (B, N)
    frozen_at_exit = torch.equal(fast[-1][early], fast[-2][early])  # norm=False: before the final norm
    assert frozen_at_exit != bool(options.get('tail_on_all'))


def test_edge_without_frozen_kv_attends_among_active_tokens():
    with_kv, without = EdgeRecViT(**TINY), EdgeRecViT(**TINY, frozen_kv=False)
    without.load_state_dict(with_kv.state_dict())
    x = torch.randn(1, 3, 64, 64)
    for m in (with_kv, without):
        force_mean_depth(m.eval(), 4.0, 0)
    with torch.no_grad():
        a, out = with_kv(x)[-1], without(x)
    assert not torch.allclose(a, out[-1])
    keys = [blk.keys for blk in out.stats.blocks]
    assert keys == [blk.queries for blk in out.stats.blocks]  # attention among the queried tokens


def test_the_temperature_anneals_the_training_depths_to_the_test_depths():
    """Issue 37.3: training draws each token's depth from softmax(z / tau) (Gumbel-max), eval runs the argmax. At
    tau=1 they disagree for most tokens (E[max p] agree); as tau -> 0 every token trains at its test depth. (The
    textbook relaxation softmax((z + g) / tau) would not: its draw argmax(z + g) does not depend on tau.)"""
    model = build(du_loss_weight=0.0).train()
    x = torch.randn(4, 3, 64, 64)
    shares = {}
    for tau in (1.0, 1e-6):
        model.gumbel_tau = tau
        torch.manual_seed(0)
        stats = model(x).stats
        depth, argmax = stats.token_maps['depth'], stats.scalars['depth/argmax_mean']
        shares[tau] = stats.scalars['depth/train_is_test'].item()
        with torch.no_grad():  # the eval depths of the same ranker
            test_depth = model.eval()(x).stats.token_maps['depth']
        model.train()
        assert shares[tau] == pytest.approx((depth == test_depth).float().mean().item())
        assert argmax.item() == pytest.approx(test_depth.float().mean().item())
    assert shares[1e-6] == 1.0 and shares[1.0] < 0.5


def test_the_confidence_map_keeps_its_graph_for_cce():
    model = build().train()
    stats = model(torch.randn(2, 3, 64, 64)).stats
    confidence = stats.token_maps['confidence']
    confidence.sum().backward()  # CCE's path to the ranker (mmrecvit/mm/cce.py)
    assert model.ranker.fc2.weight.grad.abs().sum() > 0
    assert not stats.scalars['depth/conf'].requires_grad


def test_the_temperature_is_a_buffer_out_of_the_state_dict():
    """Issue 48.3: `gumbel_tau` is read as a tensor by the forward (a compiled forward does not recompile as it
    anneals): setting it writes one fp32 buffer in place; it stays out of the state dict (checkpoints from before
    load strictly) and fp32 through casts."""
    model = build()
    tau = model._gumbel_tau
    model.gumbel_tau = 0.3
    assert model._gumbel_tau is tau and tau.item() == pytest.approx(0.3) and model.gumbel_tau == 0.3
    assert not any('gumbel_tau' in k for k in model.state_dict())
    build().load_state_dict(model.state_dict())  # strict
    model.bfloat16()
    assert model._gumbel_tau.dtype == torch.float32 and model._gumbel_tau.item() == torch.tensor(0.3).item()
    with pytest.raises(ValueError, match='gumbel_tau'):
        model.gumbel_tau = 0.0
