"""Starting from DeiT, agreement of training and test, low precision, and the ablation switches.

Each test here fails on the behaviour it replaced: routers kept at zero when loading DeiT, the
balance loss on sampled depths, router logits in bf16, graph cuts in nonfinite='warn', missing
switches.
"""
import math

import pytest
import torch
import torch.nn.functional as F
from backbone_cases import BACKBONE_CASES
from timm.models.vision_transformer import VisionTransformer

from mmrecvit.benchmark import force_mean_depth
from mmrecvit.mm.hooks import TemperatureScheduleHook
from mmrecvit.models import BACKBONES, EdgeRecViT, MoRViT, NaiveRecursiveViT, ReViT, SRViT
from mmrecvit.models.checkpoint import load_state_dict_into
from mmrecvit.models.numerics import FiniteGuard

pytestmark = pytest.mark.usefixtures('one_thread')
TINY = dict(embed_dim=32, num_heads=2, img_size=64)


@pytest.fixture(scope='module')
def deit():
    """A 12-block timm ViT (random weights: a stand-in for DeiT) and its state dict."""
    torch.manual_seed(0)
    vit = VisionTransformer(img_size=64, patch_size=16, embed_dim=32, depth=12, num_heads=2, num_classes=10).eval()
    return vit, vit.state_dict()


def distance_to_deit(model, vit, sd):
    """(mean per-token cosine, mean per-token relative L2 error) of the last map to DeiT's last block."""
    load_state_dict_into(model, sd, 'deit')
    x = torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = model.eval()(x)[-1].flatten(2)  # (B, D, h*w)
        ref = vit.forward_intermediates(x, indices=[11], intermediates_only=True)[-1].flatten(2)
    cosine = F.cosine_similarity(ours, ref, dim=1).mean()
    return float(cosine), float(((ours - ref).norm(dim=1) / ref.norm(dim=1)).mean())


# ---- a start from DeiT that is DeiT's function where the method can represent it --------------------------------
@pytest.mark.parametrize('T', [2, 4])
def test_srvit_function_init_starts_as_deit_for_any_T(deit, T):
    vit, sd = deit
    cosine, error = distance_to_deit(SRViT(**TINY, num_recursions=T), vit, sd)
    _, old_error = distance_to_deit(SRViT(**TINY, num_recursions=T, timm_init='fresh'), vit, sd)  # the old start
    assert cosine >= 0.999 and error < 0.1 * old_error


def test_mor_open_gates_apply_whole_blocks(deit):
    """With a shared unit as deep as DeiT's middle (one recursion of 10 blocks), alpha = 1, open
    gates and full capacity, MoR-ViT starts as DeiT; the from-scratch gates (alpha 0.1) do not."""
    vit, sd = deit
    kwargs = dict(**TINY, num_recursions=1, unit_size=10, capacities=[1.0], timm_init='pick', shared_init_block=1)
    cosine, error = distance_to_deit(MoRViT(**kwargs, router_alpha=1.0), vit, sd)
    _, old_error = distance_to_deit(MoRViT(**kwargs, timm_gates='fresh'), vit, sd)
    assert cosine >= 0.999 and error < 0.1 * old_error


def test_naive_cycle_init_is_deit_when_every_step_has_its_block(deit):
    vit, sd = deit
    assert distance_to_deit(NaiveRecursiveViT(**TINY, depth=12, num_blocks=12), vit, sd)[1] < 1e-5
    # with fewer blocks than steps: each block starts from the mean of the DeiT blocks of its steps
    cycle = NaiveRecursiveViT(**TINY, depth=12, num_blocks=3)
    load_state_dict_into(cycle, sd, 'deit')
    expected = torch.stack([sd[f'blocks.{i}.attn.qkv.weight'] for i in (1, 4, 7, 10)]).mean(0)
    torch.testing.assert_close(cycle.blocks[1].attn.qkv.weight, expected)


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
    uniform = ReViT(**TINY, num_experts=4, timm_gates='uniform')
    load_state_dict_into(uniform, sd, 'deit')
    assert torch.allclose(uniform.merged_ffns()[0], torch.full((12, 4), 0.25))


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
    model(x)
    stats = model.stats
    tokens = model.embed(x)[:, 1:]
    probs = model.ranker(tokens).softmax(-1)
    argmax = probs.argmax(-1) + 1
    expected = 5 * (probs.mean((0, 1)) * F.one_hot(argmax - 1, 5).float().mean((0, 1))).sum()
    torch.testing.assert_close(stats.aux_losses['loss_du'], model.du_loss_weight * expected)
    assert not torch.equal(stats.token_maps['depth'], argmax)  # the forward ran sampled depths
    hist = [float(stats.scalars[f'depth/argmax_d{d}']) for d in range(1, 6)]
    assert hist == pytest.approx([float((argmax == d).float().mean()) for d in range(1, 6)])
    assert 'depth/d1' in stats.scalars and 'depth/argmax_mean' in stats.scalars


def test_temperature_schedule_hook_anneals_gumbel_tau():
    hook = TemperatureScheduleHook(start=1.0, end=0.1, schedule='cosine')
    assert hook.value_at(0, 100) == pytest.approx(1.0) and hook.value_at(100, 100) == pytest.approx(0.1)
    assert hook.value_at(50, 100) == pytest.approx(0.55)
    assert TemperatureScheduleHook(1.0, 0.1, schedule='exp').value_at(50, 100) == pytest.approx(math.sqrt(0.1))

    class Runner:
        iter, max_iters = 25, 100

        class message_hub:  # noqa: N801
            values = {}

            @classmethod
            def update_scalar(cls, key, value):
                cls.values[key] = value

    runner = Runner()
    runner.model = torch.nn.Sequential(EdgeRecViT(**TINY, depth=4))
    hook.before_train_iter(runner, 0)
    assert runner.model[0].gumbel_tau == pytest.approx(hook.value_at(25, 100))
    assert Runner.message_hub.values['train/gumbel_tau'] == runner.model[0].gumbel_tau
    with pytest.raises(ValueError, match='TemperatureScheduleHook end'):
        TemperatureScheduleHook(end=0.0)
    runner.model = torch.nn.Sequential(BACKBONES['PlainViT'](**TINY, depth=2))
    with pytest.raises(AttributeError, match="no mmrecvit backbone of the model has 'gumbel_tau'"):
        hook.before_train_iter(runner, 0)


# ---- low precision: routers decide in full precision, ties broken deterministically ----------------------------
def mor_with_linear_scores(scores):
    """MoR-ViT whose routers score a token by its channel 0 plus 1 (and states carrying `scores` there)."""
    model = MoRViT(**TINY, num_recursions=3, capacities=[0.5, 0.25, 0.125]).eval()
    with torch.no_grad():
        for router in model.routers:
            router.weight.zero_()
            router.weight[0, 0] = 1.0
            router.bias.fill_(1.0)
    x = torch.zeros(scores.shape[0], 1 + scores.shape[1], 32)
    x[:, 1:, 0] = scores
    return model, x


def chosen(model, x):
    from mmrecvit.models.mor_vit import ExpertChoice

    active, _ = ExpertChoice(model, x).select(0, x)
    return active.index


def test_router_selection_under_bf16_autocast_equals_fp32():
    """Scores 1 + a ramp of 1e-4 steps: distinct in fp32, mostly tied in bf16 (8 mantissa bits)."""
    model, x = mor_with_linear_scores(torch.linspace(0, 6.3e-3, 64).flip(0).roll(17).expand(2, 64))
    with torch.no_grad():
        fp32 = chosen(model, x)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            bf16, again = chosen(model, x), chosen(model, x)
    assert torch.equal(bf16, fp32) and torch.equal(again, bf16)
    assert len(torch.unique(torch.linspace(0, 6.3e-3, 64).add(1).bfloat16())) < 10  # the ties bf16 would make


def test_exact_ties_break_by_position():
    model, x = mor_with_linear_scores(torch.zeros(1, 16))  # every token scores the same
    with torch.no_grad():
        model.forward_states(x, [model.depth - 1])
    assert model.stats.token_maps['recursions'][0].tolist() == [3, 3, 2, 2, 1, 1, 1, 1] + [0] * 8


def test_edge_ranker_and_noise_are_fp32_under_autocast():
    model = EdgeRecViT(**TINY, depth=5).train()
    seen = {}
    model.ranker.register_forward_hook(lambda m, a, out: seen.update(dtype=out.dtype, input=a[0].dtype))
    with torch.autocast('cpu', dtype=torch.bfloat16):
        outs = model(torch.randn(1, 3, 64, 64))
    assert seen == dict(dtype=torch.float32, input=torch.float32)
    assert outs[-1].dtype == torch.bfloat16 or outs[-1].dtype == torch.float32


# ---- nonfinite='warn' keeps every parameter in the graph -------------------------------------------------------
@pytest.mark.parametrize('name', ['SRViT', 'ReViT', 'EdgeRecViT', 'MoRViT'])
def test_warn_mode_keeps_the_routers_in_the_graph(name):
    model = BACKBONES[name](**BACKBONE_CASES[name], nonfinite='warn').train()
    router = {'SRViT': 'routers.0.proj.bias', 'ReViT': 'router.fc2.bias', 'EdgeRecViT': 'ranker.fc2.weight',
              'MoRViT': 'routers.0.bias'}[name]
    with torch.no_grad():
        model.get_parameter(router).fill_(float('nan'))
    outs = model(torch.randn(2, 3, 64, 64))
    loss = sum(o.mean() for o in outs) + sum(model.stats.aux_losses.values(), torch.zeros(()))
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


# ---- the ablation switches and sizes ----------------------------------------------------------------------
def test_srvit_step_transform_kinds():
    params = {k: sum(p.numel() for n, p in SRViT(**TINY, step_transform=k).named_parameters()
                     if n.startswith('step_transforms')) for k in ('linear', 'shift', 'none')}
    assert params == {'linear': 12 * (32 * 32 + 32), 'shift': 12 * 32, 'none': 0}
    model = SRViT(**TINY, step_transform='none')
    model(torch.randn(1, 3, 64, 64))
    assert not [w for w in model.stats.work if getattr(w, 'name', '').startswith('step_transforms')]


def test_mor_additive_update():
    """'additive': h <- h + g Block(h), MoR's code; 'interpolate': h + g (Block(h) - h)."""
    for update in ('interpolate', 'additive'):
        model = MoRViT(**TINY, num_recursions=1, capacities=[1.0], router_alpha=1.0, update=update).eval()
        x = model.embed(torch.randn(1, 3, 64, 64))
        with torch.no_grad():
            first = model.blocks[0](x)
            g = torch.sigmoid(model.routers[0](first))  # (1, N, 1)
            block = model.blocks[1](first)
            mid = first + g * block if update == 'additive' else first + g * (block - first)
            expected = model.blocks[2](mid)
            got = model.forward_states(x, [2])[0]
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('options', [dict(frozen_kv=False), dict(tail_on_all=True),
                                     dict(frozen_kv=False, tail_on_all=True)])
def test_edge_switches_engine_equals_masked_reference(options):
    model = EdgeRecViT(**TINY, **options).eval()
    force_mean_depth(model, 5.0, 3)
    x = model.embed(torch.randn(3, 3, 80, 112))
    with torch.no_grad():
        model.execution = 'adaptive'
        fast = model.forward_states(x, list(range(12)))
        depth = model.stats.token_maps['depth']
        model.execution = 'masked'
        ref = model.forward_states(x, list(range(12)))
    for a, b in zip(fast, ref):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    early = torch.cat([torch.zeros(3, 1, dtype=torch.bool), depth.flatten(1) < 12], 1)  # (B, N)
    frozen_at_exit = torch.equal(fast[-1][early], fast[-2][early])  # forward_states: before the final norm
    assert frozen_at_exit != bool(options.get('tail_on_all'))


def test_edge_without_frozen_kv_attends_among_active_tokens():
    with_kv, without = EdgeRecViT(**TINY), EdgeRecViT(**TINY, frozen_kv=False)
    without.load_state_dict(with_kv.state_dict())
    x = torch.randn(1, 3, 64, 64)
    for m in (with_kv, without):
        force_mean_depth(m.eval(), 4.0, 0)
    with torch.no_grad():
        a, b = with_kv(x)[-1], without(x)[-1]
    assert not torch.allclose(a, b)
    keys = [blk.keys for blk in without.stats.blocks]
    assert keys == [blk.queries for blk in without.stats.blocks]  # attention among the queried tokens


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_every_method_has_a_large_size(name):
    with torch.device('meta'):
        model = BACKBONES[name](arch='large')
    assert model.embed_dim == 1024 and model.num_heads == 16 and model.depth == (96 if name == 'SRViT' else 24)
