"""The test-time compute knob (issue 20): one `compute` fraction for every backbone, and its curve tool."""
import pytest
import torch
from backbone_cases import BACKBONE_CASES

from mmrecvit.models import BACKBONES
from mmrecvit.models.compute import check_compute, kept_steps, largest_within
from mmrecvit.models.flops import OpWork, conv_work, total_flops

pytestmark = pytest.mark.usefixtures('one_thread')

NAMES = sorted(BACKBONES)

FRACTIONS = (1.0, 0.9, 0.75, 0.6, 0.45, 0.3, 0.15, 0.01)


def build(name, **kwargs):
    return BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs}).eval()


def run(model, x, compute=None):
    model.compute = compute
    with torch.no_grad():
        out = model(x)
    return out, model.stats.flops


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('out_type', ['featmap', 'cls_token'])
def test_compute_one_is_the_default_forward_exactly(name, out_type):
    model = build(name, out_type=out_type)
    x = torch.randn(2, 3, 64, 48)
    run(model, x)  # a first forward (reViT fills its merged-expert cache)
    ref, ref_flops = run(model, x)
    out, flops = run(model, x, 1.0)
    assert len(out) == len(ref) and all(torch.equal(a, b) for a, b in zip(out, ref))
    assert flops == ref_flops


@pytest.mark.parametrize('name', NAMES)
def test_lower_compute_never_costs_more_and_the_lowest_costs_less(name):
    model = build(name)
    x = torch.randn(2, 3, 64, 48)
    run(model, x)
    flops = [run(model, x, c)[1] for c in FRACTIONS]
    assert all(b <= a for a, b in zip(flops, flops[1:])), flops
    assert flops[-1] < flops[0], flops


@pytest.mark.parametrize('name', NAMES)
def test_the_setting_reached_fits_the_budget_unless_it_is_the_smallest(name):
    """At fraction c the model runs at <= c x its full-depth FLOPs, or at its smallest setting."""
    model = build(name)
    x = torch.randn(1, 3, 64, 64)
    run(model, x, 1e-6)
    smallest = run(model, x, 1e-6)[1]
    model.compute = None
    full = _full_flops(model, x)
    for c in (0.8, 0.6, 0.4):
        run(model, x, c)  # reViT: the merged experts of a new depth are computed once, then cached
        reached = run(model, x, c)[1]
        assert reached <= c * full * (1 + 1e-9) or reached == smallest, (c, reached, full, smallest)


def _full_flops(model, x):
    """Full-depth FLOPs of `model` on `x` from each method's own candidate model."""
    grid = model.patch_grid(x)
    model._grid = grid  # the candidates' window layouts read it
    tokens = grid[0] * grid[1] + model.num_prefix_tokens
    embed = conv_work('patch_embed', model.patch_embed.proj, grid).flops
    name = type(model).__name__
    if name == 'SRViT':
        return embed + sum(total_flops(model.unit_work(u, tokens, t)) for u, t in enumerate(model.num_recursions))
    if name == 'MoRViT':
        return embed + total_flops(model.expert_choice_work((1.0,) * model.num_recursions, tokens))
    if name == 'EdgeRecViT':
        run(model, x)
        ranker = total_flops(w for w in model.stats.work if isinstance(w, OpWork) and w.name.startswith('ranker'))
        return embed + ranker + total_flops(model.adaptive_work([tokens] * model.depth, tokens))
    return embed + total_flops(model.dense_stats(tokens, model.depth).work)


@pytest.mark.parametrize('name', NAMES)
def test_compute_is_settable_on_a_built_model_and_from_the_constructor(name):
    x = torch.randn(1, 3, 64, 64)
    torch.manual_seed(0)
    built = build(name, compute=0.3)
    torch.manual_seed(0)
    late = build(name)
    out_built, flops_built = run(built, x, built.compute)
    out_late, flops_late = run(late, x, 0.3)
    assert flops_built == flops_late
    assert all(torch.equal(a, b) for a, b in zip(out_built, out_late))
    assert run(late, x, None)[1] > flops_late  # back to the default forward


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('value, exc', [(0.0, ValueError), (-0.5, ValueError), (1.01, ValueError),
                                        (float('inf'), ValueError), ('0.5', TypeError), (True, TypeError)])
def test_bad_compute_names_the_argument_and_the_range(name, value, exc):
    with pytest.raises(exc, match=r'compute.*\(0, 1\]'):
        build(name, compute=value)
    model = build(name)
    model.compute = value
    with pytest.raises(exc, match=r'compute.*\(0, 1\]'), torch.no_grad():
        model(torch.randn(1, 3, 32, 32))


@pytest.mark.parametrize('name', NAMES)
def test_compute_in_training_is_an_error(name):
    model = build(name, compute=0.5).train()
    with pytest.raises(RuntimeError, match='compute=0.5 is a test-time knob'):
        model(torch.randn(1, 3, 32, 32))


def test_mor_token_choice_takes_no_compute():
    with pytest.raises(ValueError, match="routing='expert_choice'"):
        build('MoRViT', routing='token_choice', compute=0.5)


# ---- each method's mechanism ---------------------------------------------------------------------
def test_baselines_drop_applications_from_the_end_and_read_the_rescaled_stage_ends():
    assert kept_steps((2, 5, 8, 11), 12, 6) == (0, 2, 3, 5)
    assert kept_steps((2, 5, 8, 11), 12, 12) == (2, 5, 8, 11)
    model = build('PlainViT', depth=8, out_indices=(1, 3, 5, 7))
    x = torch.randn(1, 3, 64, 64)
    run(model, x, 0.55)
    kept = len(model.stats.blocks)
    assert 1 <= kept < 8
    # The outputs are those of the first `kept` blocks at the rescaled steps.
    with torch.no_grad():
        states, _ = model.get_intermediate_states(x, list(kept_steps((1, 3, 5, 7), 8, kept)))
    out, _ = run(model, x, 0.55)
    assert all(torch.equal(o, m) for o, m in zip(out, model.to_maps(states, model.stats.grid)))
    assert model.out_indices == (1, 3, 5, 7)  # put back after the forward


def test_srvit_cuts_recursions_from_the_unit_with_most():
    model = build('SRViT', num_recursions=[4, 4, 2, 2])
    x = torch.randn(1, 3, 64, 64)
    run(model, x, 0.7)
    ran = [model.stats.token_maps[f'mixture/unit{u}'].shape[1] for u in range(4)]
    assert ran != [4, 4, 2, 2] and all(1 <= r <= t for r, t in zip(ran, [4, 4, 2, 2]))
    assert max(ran) - min(ran) <= 2  # the chain evens the units out before cutting below 2
    assert model.eval_recursions == (4, 4, 2, 2)


def test_revit_runs_as_a_shallower_revit():
    model = build('ReViT', depth=8)
    x = torch.randn(1, 3, 64, 64)
    run(model, x, 0.5)
    kept = len(model.stats.blocks)
    assert 2 <= kept < 8 and model.depth == 8
    out, _ = run(model, x, 0.5)
    model.depth = kept
    ref, _ = run(model, x)
    assert all(torch.equal(a, b) for a, b in zip(out, ref))


def test_edge_recvit_shifts_each_images_depths_and_keeps_their_order():
    model = build('EdgeRecViT', depth=8)
    x = torch.randn(2, 3, 64, 64)
    run(model, x)
    default = model.stats.token_maps['depth'].clone()
    run(model, x, 0.35)
    shifted = model.stats.token_maps['depth']
    diff = (shifted - default).flatten(1)
    assert (diff <= 0).all() and (shifted < default).any()
    # Per image one shift, unless clipped at depth 1.
    for b in range(2):
        unclipped = shifted[b].flatten() > 1
        assert diff[b][unclipped].unique().numel() <= 1
    # A result does not depend on the batch it ran in.
    single, _ = run(model, x[:1], 0.35)
    batch, _ = run(model, x, 0.35)
    assert all(torch.allclose(s, b[:1], atol=1e-5) for s, b in zip(single, batch))


def test_edge_recvit_work_model_is_its_forwards():
    for kwargs in (dict(), dict(window_size=2), dict(frozen_kv=False), dict(tail_on_all=True)):
        model = build('EdgeRecViT', **kwargs)
        run(model, torch.randn(3, 3, 64, 48))
        depth = model.stats.token_maps['depth'].flatten(1)
        blocks = total_flops(model.stats.blocks)
        tokens = depth.shape[1] + 1
        alive = [[int((d > s).sum()) + 1 for s in range(model.depth)] for d in depth]
        mirror = sum(total_flops(model.adaptive_work(a, tokens)) for a in alive) / len(alive)
        assert mirror == pytest.approx(blocks, rel=1e-12), kwargs


def test_mor_vit_scales_its_capacities():
    model = build('MoRViT', num_recursions=4)
    x = torch.randn(1, 3, 64, 64)
    run(model, x)
    default = [model.stats.scalars[f'sel/r{r}'].item() for r in range(4)]
    run(model, x, 0.5)
    scaled = [model.stats.scalars[f'sel/r{r}'].item() for r in range(4)]
    assert all(s <= d for s, d in zip(scaled, default)) and scaled != default
    assert model.capacities is None
    # The work model is the forward's.
    tokens = model.stats.grid[0] * model.stats.grid[1] + 1
    run(model, x)
    assert total_flops(model.expert_choice_work(model.capacity_schedule, tokens)) == pytest.approx(
        total_flops(w for w in model.stats.work if not (isinstance(w, OpWork) and w.name == 'patch_embed')))


def test_largest_within_rounds_down_and_falls_back_to_the_smallest():
    flops = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert largest_within(1.0, 5.0, flops.__getitem__, 5) == 4
    assert largest_within(0.7, 5.0, flops.__getitem__, 5) == 2
    assert largest_within(0.1, 5.0, flops.__getitem__, 5) == 0
    assert check_compute(None) is None and check_compute(1) == 1.0
