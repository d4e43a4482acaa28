"""SR-ViT's defining properties (docs/methods/srvit.md, issue 4). Shapes, gradients, strict round trips and
with_cp run in the shared suite (`test_common.py`)."""

import pytest
import torch
import torch.nn.functional as F
from backbone_cases import distance_to_deit, traced_with_stats
from timm.models.vision_transformer import VisionTransformer

from mmrecvit.benchmark import PeakMemoryTracker
from mmrecvit.models import PlainViT, SRViT
from mmrecvit.models.checkpoint import CheckpointError

pytestmark = pytest.mark.usefixtures('one_thread')

TINY = dict(arch='tiny', embed_dim=32, num_heads=2, img_size=64)


def build(**kwargs):
    return SRViT(**{**TINY, 'depth': 6, **kwargs})


def randomize_method_parameters(model, seed=3):
    """Step transforms and routers start at zero; give them values so that they matter."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith('step_transforms'):
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
            elif name.startswith('routers'):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model


def reference(model, img, steps=None):
    """docs/methods/srvit.md written out naively: keep every step state, then mix. Returns the unit outputs as
    maps (B, D, h, w) and the readout weights (B, T', h, w) of every unit."""
    steps = steps or model.unit_recursions
    x, grid = model.embed(img), model.patch_grid(img)
    outs, weights = [], []
    for u, blocks in enumerate(model.unit_blocks):
        h, states = x, []
        for t in range(steps[u]):
            if t:
                h = h + model.step_transforms[u][t].proj(h)
            for b in blocks:
                h = model.blocks[b](h)
            states.append(h)
        H = torch.stack(states, dim=2)  # T' x (B, N, D) -> (B, N, T', D)
        if model.readout == 'final' or str(u) not in model.routers:
            w = F.one_hot(torch.full(H.shape[:2], steps[u] - 1), steps[u]).float()
        else:
            proj = model.routers[str(u)].proj
            W, bias = proj.weight[: steps[u]], proj.bias[: steps[u]]
            if model.router_input == 'unit_input':
                z = F.linear(x, W, bias)  # (B, N, T')
            else:
                z = torch.einsum('bntd,td->bnt', H, W) + bias  # row t scores state t
            w = F.one_hot(z.argmax(-1), steps[u]).float() if model.readout == 'hard' else z.softmax(-1)
        x = (w.unsqueeze(-1) * H).sum(2)
        outs.append(x)
        weights.append(w)
    to_grid = [t[:, 1:].transpose(1, 2).reshape(t.shape[0], t.shape[2], *grid) for t in outs + weights]
    return to_grid[: len(outs)], to_grid[len(outs) :]


# ---- T = 1 is DeiT, through the real pretrained-loading path ---------------------------------------------------
def test_t1_reproduces_timm_block_outputs_at_unit_ends(tmp_path):
    torch.manual_seed(0)
    vit = VisionTransformer(img_size=64, patch_size=16, embed_dim=32, depth=12, num_heads=2, num_classes=10).eval()
    with torch.no_grad():  # no zero biases / unit norms: every tensor must be mapped
        for p in vit.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    path = tmp_path / 'deit.pth'
    torch.save({'model': vit.state_dict()}, path)  # DeiT's layout, classifier included

    model = SRViT(**TINY, num_recursions=1, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    model.init_weights()
    model.eval()
    assert model.unit_sizes == (4, 4, 2, 2) and not list(model.routers) and model.depth == 12
    img = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ours = model(img)
        theirs = vit.forward_intermediates(img, indices=[3, 7, 9, 11], intermediates_only=True)
    assert len(ours) == 4
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)

    # The same checkpoint initialises T = 4: blocks copied, step transforms and router weights kept at
    # zero, router biases toward recursion 1 (router_init='function').
    model4 = SRViT(**TINY, num_recursions=4, pretrained=str(path))
    model4.init_weights()
    torch.testing.assert_close(model4.blocks[7].mlp.fc1.weight, vit.blocks[7].mlp.fc1.weight, rtol=0, atol=0)
    assert all(
        not p.any()
        for n, p in model4.named_parameters()
        if n.startswith('step_transforms') or (n.startswith('routers') and n.endswith('weight'))
    )
    for router in model4.routers.values():
        torch.testing.assert_close(router.proj.bias.softmax(0)[0], torch.tensor(0.99))


def test_checkpoint_of_another_depth_is_an_error(tmp_path):
    vit = VisionTransformer(img_size=64, patch_size=16, embed_dim=32, depth=6, num_heads=2, num_classes=0)
    torch.save(vit.state_dict(), tmp_path / 'six.pth')
    model = SRViT(**TINY, num_recursions=2, pretrained=str(tmp_path / 'six.pth'))
    with pytest.raises(ValueError, match='6-block checkpoint onto SRViT with depth=12'):
        model.init_weights()


# ---- parameters ---------------------------------------------------------------------------------------------------
def test_parameter_overhead_over_deit_small_is_step_transforms_and_routers():
    with torch.device('meta'):
        deit = VisionTransformer(img_size=224, patch_size=16, embed_dim=384, depth=12, num_heads=6)
    deit_backbone = sum(p.numel() for n, p in deit.named_parameters() if not n.startswith(('norm.', 'head.')))
    srvit = SRViT('small', num_recursions=4)
    D, T = 384, 4
    step_transforms = 4 * (T - 1) * (D * D + D)  # 12 (D^2 + D) = 1.774M
    routers = 4 * (D * T + T)
    assert sum(p.numel() for p in srvit.parameters()) - deit_backbone == step_transforms + routers == 1_780_240
    own = {n for n, _ in srvit.named_parameters()}
    assert {n for n, _ in deit.named_parameters() if not n.startswith(('norm.', 'head.'))} <= own
    assert sum(p.numel() for n, p in srvit.named_parameters() if n.startswith('step_transforms')) == step_transforms
    assert sum(p.numel() for n, p in srvit.named_parameters() if n.startswith('routers')) == routers


def test_parameters_depend_on_t_only_not_on_how_the_model_runs():
    keys = set(build(num_recursions=3).state_dict())
    for kwargs in (dict(eval_recursions=1), dict(router_input='recursion_states'), dict(readout='hard')):
        assert set(build(num_recursions=3, **kwargs).state_dict()) == keys, kwargs
    assert not [k for k in build(num_recursions=3, readout='final').state_dict() if k.startswith('routers')]
    # Units with a single step have neither a router nor step transforms.
    one = set(build(num_recursions=[3, 1, 2, 1]).state_dict())
    assert {k.split('.')[1] for k in one if k.startswith('routers')} == {'0', '2'}
    assert not [k for k in one if k.startswith(('step_transforms.1.', 'step_transforms.3.'))]


# ---- the readouts against the naive reference --------------------------------------------------------------------
@pytest.mark.parametrize(
    'readout, router_input',
    [
        ('soft', 'unit_input'),
        ('soft', 'recursion_states'),
        ('hard', 'unit_input'),
        ('hard', 'recursion_states'),
        ('final', 'unit_input'),
    ],
)
def test_outputs_and_weights_match_the_naive_reference(readout, router_input):
    model = randomize_method_parameters(build(num_recursions=[3, 2, 4, 1], readout=readout, router_input=router_input))
    model.eval()
    img = torch.randn(2, 3, 48, 80)
    with torch.no_grad():
        outs = model(img)
        ref_outs, ref_weights = reference(model, img)
    for a, b in zip(outs, ref_outs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    for u, w in enumerate(ref_weights):
        got = outs.stats.token_maps[f'mixture/unit{u}']
        assert got.shape == (2, model.unit_recursions[u], 3, 5)
        torch.testing.assert_close(got, w, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got.sum(1), torch.ones(2, 3, 5))  # weights sum to 1 per token
    if readout != 'final' and model.unit_recursions[0] > 1:  # the router really mixes (not a uniform/one-step case)
        w0 = outs.stats.token_maps['mixture/unit0']
        assert (w0.amax(1) - w0.amin(1)).mean() > 0.05
        assert len({int(i) for i in w0.argmax(1).flatten()}) > 1


def test_final_readout_is_the_unit_run_t_times_with_no_router():
    soft = randomize_method_parameters(build(num_recursions=3)).eval()
    final = build(num_recursions=3, readout='final').eval()
    final.load_state_dict({k: v for k, v in soft.state_dict().items() if not k.startswith('routers')}, strict=True)
    img = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        x = final.embed(img)
        expected = []
        for u, blocks in enumerate(final.unit_blocks):
            for t in range(3):
                if t:
                    x = x + final.step_transforms[u][t].proj(x)
                for b in blocks:
                    x = final.blocks[b](x)
            expected.append(x[:, 1:].transpose(1, 2).reshape(1, 32, 4, 4))
        got, mixed = final(img), soft(img)
    for a, b, c in zip(got, expected, mixed):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(a, c, atol=1e-3)  # the soft mixture is something else
    assert (got.stats.token_maps['mixture/unit3'][:, -1] == 1).all()


def test_hard_readout_picks_one_step_and_trains_the_router_straight_through():
    hard = randomize_method_parameters(build(num_recursions=4, readout='hard', out_units=(0,))).train()
    soft = build(num_recursions=4, out_units=(0,)).train()
    soft.load_state_dict(hard.state_dict())
    img = torch.randn(2, 3, 64, 64)
    target = torch.randn(2, 32, 4, 4)
    out = hard(img)
    (y_hard,) = out
    weights = out.stats.token_maps['mixture/unit0']  # (B, T, h, w)
    assert ((weights == 0) | (weights == 1)).all() and (weights.sum(1) == 1).all()
    assert len(set(weights.argmax(1).flatten().tolist())) > 1  # tokens choose different steps
    (y_hard * target).sum().backward()
    router_grad = hard.routers['0'].proj.weight.grad.clone()
    unit0 = tuple(f'blocks.{b}.' for b in hard.unit_blocks[0])
    block_grads = {n: p.grad.clone() for n, p in hard.named_parameters() if n.startswith(unit0)}
    hard.zero_grad()

    # Forward value and state gradients: those of the chosen step's state alone.
    x = hard.embed(img)
    h, states = x, []
    for t in range(4):
        h = hard.step_transforms[0][t](h)
        for b in hard.unit_blocks[0]:
            h = hard.blocks[b](h)
        states.append(h[:, 1:].transpose(1, 2).reshape(2, 32, 4, 4))
    chosen = (torch.stack(states, 1) * weights.unsqueeze(2)).sum(1)
    torch.testing.assert_close(y_hard, chosen, rtol=0, atol=1e-6)
    (chosen * target).sum().backward()
    for n, g in block_grads.items():
        torch.testing.assert_close(g, hard.get_parameter(n).grad, msg=n)
    # The router's gradient is the soft mixture's (for a loss linear in the output).
    (y_soft,) = soft(img)
    (y_soft * target).sum().backward()
    assert router_grad.abs().sum() > 0
    torch.testing.assert_close(router_grad, soft.routers['0'].proj.weight.grad, rtol=1e-4, atol=1e-6)


# ---- test-time steps T' <= T -------------------------------------------------------------------------------------
def test_fewer_eval_recursions_load_strictly_and_renormalise_the_router(tmp_path):
    trained = randomize_method_parameters(build(num_recursions=4))
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in trained.state_dict().items()}}, tmp_path / 'det.pth')
    cfg = dict(type='Pretrained', checkpoint=str(tmp_path / 'det.pth'), prefix='backbone.')
    short = build(num_recursions=4, eval_recursions=[2, 1, 3, 4], init_cfg=cfg)
    short.init_weights()  # strict: the keys do not depend on eval_recursions
    short.eval()
    img = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        outs = short(img)
        ref_outs, _ = reference(short, img, steps=[2, 1, 3, 4])
        full_weights = trained.eval()(img).stats.token_maps['mixture/unit0']
    for a, b in zip(outs, ref_outs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    w = outs.stats.token_maps['mixture/unit0']
    assert w.shape[1] == 2  # the truncated softmax is the full one renormalised over the first T' steps
    torch.testing.assert_close(w, full_weights[:, :2] / full_weights[:, :2].sum(1, keepdim=True))
    assert len(outs.stats.blocks) == 2 * 2 + 1 * 2 + 3 * 1 + 4 * 1
    # Training always runs T; the knob can be changed on a built model.
    short.train()
    stats = short(img).stats
    assert stats.token_maps['mixture/unit1'].shape[1] == 4 and len(stats.blocks) == 4 * 6
    short.eval_recursions = 1
    assert short.eval_recursions == (1, 1, 1, 1)
    with pytest.raises(ValueError, match=r'eval_recursions\[2\]'):
        short.eval_recursions = [4, 4, 5, 4]


# ---- schedule, statistics, memory --------------------------------------------------------------------------------
def test_applications_are_scheduled_and_indexed_by_step(monkeypatch):
    model = build(num_recursions=[2, 3, 1, 2], drop_path_rate=0.1).train()
    assert model.num_steps == len(model.schedule) == len(model.drop_path_rates) == 2 * 2 + 3 * 2 + 1 + 2
    assert model.depth == 6  # the layers: each unit runs its layers in place
    assert model.schedule[:6] == [0, 1, 0, 1, 2, 3]  # unit 0 (blocks 0, 1) twice, then unit 1 (blocks 2, 3)
    calls = []
    run = model.block_runner()  # every block application of a forward goes through it

    def spy(block, x, **kwargs):  # the application's block and its step's stochastic-depth rate
        calls.append((kwargs['drop_path_rate'], next(i for i, b in enumerate(model.blocks) if b is block)))
        return run(block, x, **kwargs)

    monkeypatch.setattr(model, 'block_runner', lambda: spy)
    stats = model(torch.randn(1, 3, 32, 32)).stats
    assert calls == [(model.drop_path_rates[t], b) for t, b in enumerate(model.schedule)]
    assert len(set(model.drop_path_rates)) == model.num_steps  # distinct: the rates name the steps
    assert len(stats.blocks) == len(calls)


def test_statistics():
    model = randomize_method_parameters(build(num_recursions=3)).eval()
    with torch.no_grad():
        stats = model(torch.randn(2, 3, 64, 96)).stats
    assert sorted(stats.token_maps) == [f'mixture/unit{u}' for u in range(4)]
    assert stats.grid == (4, 6) and not stats.aux_losses
    for u in range(4):
        mean = [stats.scalars[f'w/u{u}r{t}'] for t in (1, 2, 3)]
        torch.testing.assert_close(sum(mean), torch.tensor(1.0))
        torch.testing.assert_close(stats.scalars[f'recursions/u{u}'], sum(t * m for t, m in zip((1, 2, 3), mean)))
        assert not any(v.requires_grad for v in stats.scalars.values())


@pytest.mark.parametrize('kwargs', [dict(), dict(router_input='recursion_states'), dict(readout='hard')])
def test_eval_memory_stays_flat_in_the_number_of_steps(kwargs):
    # Patch 8 makes block activations, not the image, dominate the peak (as at 512^2 with patch 16).
    img = torch.randn(2, 3, 64, 64)
    peaks = {}
    for T in (1, 4):
        # units [4, 4, 2, 2]
        model = SRViT(**{**TINY, 'embed_dim': 64}, patch_size=8, num_recursions=T, **kwargs).eval()
        with PeakMemoryTracker() as tracker, torch.no_grad():
            model(img)
        peaks[T] = tracker.peak_bytes
    state = 2 * 65 * 64 * 4  # one (B, N, D) float32 state
    # The running sum is the one extra state; keeping the T states would add at least T - 1 = 3.
    assert peaks[4] - peaks[1] <= 1.5 * state, (peaks, state)
    assert peaks[4] <= 1.10 * peaks[1], peaks


# ---- bad arguments -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    'kwargs, exc, words',
    [
        (dict(unit_sizes=[4, 4, 2]), ValueError, ['unit_sizes', 'sum', '12', '10']),
        (dict(unit_sizes=[4, 4, 0, 4]), ValueError, ['unit_sizes[2]']),
        (dict(unit_sizes=4), TypeError, ['unit_sizes', 'list']),
        (dict(depth=8), ValueError, ['unit_sizes', 'depth=8']),
        (dict(num_recursions=0), ValueError, ['num_recursions', '[1, inf]']),
        (dict(num_recursions=[4, 4]), ValueError, ['num_recursions', '4 ints']),
        (dict(num_recursions=2.0), TypeError, ['num_recursions', 'an int or a list of 4 ints']),
        (dict(num_recursions=[2, 2, 0, 2]), ValueError, ['num_recursions[2]']),
        (dict(num_recursions=2, eval_recursions=3), ValueError, ['eval_recursions', '[1, 2]']),
        (dict(eval_recursions=0), ValueError, ['eval_recursions']),
        (dict(readout='mean'), ValueError, ['readout', 'soft', 'final', 'hard']),
        (dict(router_input='x'), ValueError, ['router_input', 'unit_input', 'recursion_states']),
        (dict(out_units=[4]), ValueError, ['out_units', '[-4, 3]']),
    ],
)
def test_bad_arguments(kwargs, exc, words):
    with pytest.raises(exc) as info:
        SRViT(**TINY, **kwargs)
    for w in words:
        assert w in str(info.value), f'{w!r} not in error: {info.value}'


def test_wrong_checkpoint_keys_are_listed(tmp_path):
    state = build(num_recursions=2).state_dict()
    torch.save(state, tmp_path / 't2.pth')
    model = build(num_recursions=3, pretrained=str(tmp_path / 't2.pth'))
    with pytest.raises(CheckpointError, match=r'missing keys .*step_transforms\.0\.2\.proj\.bias'):
        model.init_weights()


# ---- a start from DeiT that is DeiT's function where the method can represent it --------------------------------
@pytest.mark.parametrize('T', [2, 4])
def test_srvit_function_init_starts_as_deit_for_any_T(deit, T):
    vit, sd = deit
    cosine, error = distance_to_deit(SRViT(**TINY, num_recursions=T), vit, sd)
    _, old_error = distance_to_deit(SRViT(**TINY, num_recursions=T, router_init='fresh'), vit, sd)  # the old start
    assert cosine >= 0.999 and error < 0.1 * old_error


# ---- the ablation switches and sizes ----------------------------------------------------------------------
def test_srvit_step_transform_kinds():
    params = {
        k: sum(
            p.numel() for n, p in SRViT(**TINY, step_transform=k).named_parameters() if n.startswith('step_transforms')
        )
        for k in ('linear', 'shift', 'none')
    }
    assert params == {'linear': 12 * (32 * 32 + 32), 'shift': 12 * 32, 'none': 0}
    model = SRViT(**TINY, step_transform='none')
    stats = model(torch.randn(1, 3, 64, 64)).stats
    assert not [w for w in stats.work if getattr(w, 'name', '').startswith('step_transforms')]


# ---- windows: global context in every recursion (issue 37) -------------------------------------------------------
def global_steps_per_unit(model, plan):
    """unit -> the number of steps of `plan` that attend globally."""
    counts = dict.fromkeys(range(len(model.unit_sizes)), 0)
    unit_of = {b: u for u, blocks in enumerate(model.unit_blocks) for b in blocks}
    for step in plan.steps:
        counts[unit_of[step.layer]] += step.layout is None or not hasattr(step.layout, 'size')
    return counts


def test_windowed_function_start_reaches_global_context_unlike_its_all_windowed_twin(deit):
    """At the function start recursion 1 holds 0.99 of every mixture: it must see global context itself."""
    vit, sd = deit
    x = torch.randn(2, 3, 128, 128, generator=torch.Generator().manual_seed(2))  # 8 x 8 patches, 16 windows of 2
    outs = {}
    for name, kwargs in (('windowed', {}), ('all windowed', dict(global_steps=[]))):
        model = SRViT(**TINY, num_recursions=4, window_size=2, **kwargs)
        distance_to_deit(model, vit, sd)  # loads the DeiT stand-in (router_init='function')
        with torch.no_grad():
            outs[name] = model.eval()(x)[-1]
    a, b = outs['windowed'], outs['all windowed']
    assert ((a - b).norm() / b.norm()) > 1e-2  # the former layout (global only in recursion 4): ~1e-4
    # T = 1 is the windowed PlainViT (ViTDet's layout) exactly.
    plain = PlainViT(**TINY, window_size=2, out_indices=[11])
    srvit = SRViT(**TINY, num_recursions=1, window_size=2, out_indices=[11])
    for model in (plain, srvit):
        distance_to_deit(model, vit, sd)
    with torch.no_grad():
        torch.testing.assert_close(srvit.eval()(x)[0], plain.eval()(x)[0], rtol=0, atol=1e-5)


def test_every_eval_setting_keeps_a_global_step_in_every_unit():
    model = build(num_recursions=[3, 2, 4, 2], unit_sizes=[1, 1, 1, 3], window_size=2).eval()
    grid = (8, 8)
    assert model.global_layers == (0, 1, 2, 3, 5)  # stage ends 0, 2, 3, 5 of 6; unit 1 ([1]) holds none: its last
    per_recursion = [1, 1, 1, 2]  # global layers per unit
    for T in ([3, 2, 4, 2], [1, 1, 1, 1], [2, 1, 3, 2], 1):
        model.eval_recursions = T
        for setting in model.recursion_settings():
            counts = global_steps_per_unit(model, model.plan(setting, grid))
            assert counts == {u: t * n for u, (t, n) in enumerate(zip(setting, per_recursion))}, (T, setting)
    model.eval_recursions = None
    for compute in (0.1, 0.3, 0.6, 1.0):
        with torch.no_grad():
            stats = model(torch.randn(1, 3, 128, 128), compute=compute).stats
        windowed = [w for w in stats.blocks if w.attn_pairs < w.queries * w.keys]
        assert len(stats.blocks) - len(windowed) >= 4, compute  # the FLOP model counts the global steps


@pytest.mark.parametrize('eval_recursions', [None, [2, 1, 2, 1], [1, 2, 1, 1]])
def test_windowed_flops_follow_the_global_steps_run(eval_recursions):
    model = build(num_recursions=[2, 3, 2, 1], window_size=2, eval_recursions=eval_recursions).eval()
    traced, stats = traced_with_stats(model, torch.randn(1, 3, 128, 128))
    assert stats.flops == pytest.approx(traced, rel=1e-12)


def test_the_per_unit_recursions_are_unit_recursions_and_the_old_attribute_warns():
    """One word, one meaning (issue 39 item 5): MoR-ViT's num_recursions is an int, SR-ViT's T per unit is named."""
    model = build(num_recursions=[2, 3, 1, 2])
    assert model.unit_recursions == (2, 3, 1, 2) and model.num_steps == 2 * 2 + 3 * 2 + 1 + 2
    with pytest.warns(DeprecationWarning, match='use unit_recursions instead'):
        assert model.num_recursions == model.unit_recursions
