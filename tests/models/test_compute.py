"""The test-time compute knob (issue 20): one `compute` fraction for every backbone, and its curve tool."""

import pytest
import torch
from backbone_cases import BACKBONE_CASES

from mmrecvit.models import BACKBONES, edge_recvit, token_adaptive
from mmrecvit.models.compute import check_compute, largest_within
from mmrecvit.models.flops import BlockWork
from mmrecvit.models.schedule import rescaled_layers

pytestmark = pytest.mark.usefixtures('one_thread')

NAMES = sorted(BACKBONES)

FRACTIONS = (1.0, 0.9, 0.75, 0.6, 0.45, 0.3, 0.15, 0.01)


def build(name, **kwargs):
    return BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs}).eval()


def run(model, x, compute=None):
    model.compute = compute
    with torch.no_grad():
        out = model(x)
    return out, out.stats.flops


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
    """Full-depth FLOPs of `model` on `x`: the plan of its full setting (every step over every token)."""
    return model.plan_flops(None, model.patch_grid(x))


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
@pytest.mark.parametrize(
    'value, exc',
    [
        (0.0, ValueError),
        (-0.5, ValueError),
        (1.01, ValueError),
        (float('inf'), ValueError),
        ('0.5', TypeError),
        (True, TypeError),
    ],
)
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
    model = build('MoRViT', routing='token_choice')
    with pytest.raises(ValueError, match="routing='token_choice' takes compute=None, got compute=0.5"):
        model(torch.randn(1, 3, 32, 32), compute=0.5)  # a forward's compute is refused as the attribute is


# ---- each method's mechanism ---------------------------------------------------------------------
def test_baselines_drop_applications_from_the_end_and_read_the_rescaled_stage_ends():
    assert rescaled_layers((2, 5, 8, 11), 12, 6) == (0, 2, 3, 5)
    assert rescaled_layers((2, 5, 8, 11), 12, 12) == (2, 5, 8, 11)
    assert rescaled_layers((2, 5, 8, 11), 12, 16) == (3, 7, 11, 15)
    model = build('PlainViT', depth=8, out_indices=(1, 3, 5, 7))
    x = torch.randn(1, 3, 64, 64)
    out, _ = run(model, x, 0.55)
    kept = len(out.stats.blocks)
    assert 1 <= kept < 8
    # The outputs are those of the first `kept` blocks at the rescaled layers (read without the knob).
    layers = rescaled_layers((1, 3, 5, 7), 8, kept)
    with torch.no_grad():
        maps = dict(zip(sorted(set(layers)), model.forward_intermediates(x, layers, compute=1.0)[1]))
    out, _ = run(model, x, 0.55)
    assert len(out) == 4 and all(torch.equal(o, maps[i]) for o, i in zip(out, layers))
    assert model.out_indices == (1, 3, 5, 7)  # put back after the forward


def test_srvit_cuts_recursions_from_the_unit_with_most():
    model = build('SRViT', num_recursions=[4, 4, 2, 2])
    x = torch.randn(1, 3, 64, 64)
    out, _ = run(model, x, 0.7)
    ran = [out.stats.token_maps[f'mixture/unit{u}'].shape[1] for u in range(4)]
    assert ran != [4, 4, 2, 2] and all(1 <= r <= t for r, t in zip(ran, [4, 4, 2, 2]))
    assert max(ran) - min(ran) <= 2  # the chain evens the units out before cutting below 2
    assert model.eval_recursions == (4, 4, 2, 2)


def test_revit_runs_as_a_shallower_revit():
    model = build('ReViT', depth=8)
    x = torch.randn(1, 3, 64, 64)
    out, _ = run(model, x, 0.5)
    kept = len(out.stats.blocks)
    assert 2 <= kept < 8 and model.depth == 8
    out, _ = run(model, x, 0.5)
    model.depth = kept
    ref, _ = run(model, x)
    assert all(torch.equal(a, b) for a, b in zip(out, ref))


def test_edge_recvit_shifts_each_images_depths_and_keeps_their_order():
    model = build('EdgeRecViT', depth=8)
    x = torch.randn(2, 3, 64, 64)
    default = run(model, x)[0].stats.token_maps['depth']
    shifted = run(model, x, 0.35)[0].stats.token_maps['depth']
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


def engine_work(module, monkeypatch):
    """The `BlockWork` of every `run_subset` call of `module`'s engine (what that call ran, `subset_work`), in
    call order."""
    calls, run_subset = [], module.run_subset

    def recording(block, x, active, **kwargs):
        calls.append(module.subset_work(block, active, kwargs.get('kv_cache') is not None, kwargs.get('layout')))
        return run_subset(block, x, active, **kwargs)

    monkeypatch.setattr(module, 'run_subset', recording)
    return calls


def same_work(planned: BlockWork, ran: BlockWork) -> bool:
    return (planned.queries, planned.keys, planned.attn_pairs or planned.queries * planned.keys) == pytest.approx(
        (ran.queries, ran.keys, ran.attn_pairs or ran.queries * ran.keys), rel=1e-12
    )


def test_edge_recvit_plan_is_what_its_engine_ran():
    """The plan (the FLOP model, the knob's candidates) counts what the engine computed: every token subset
    `run_subset` ran, and the keys/values the cache projected."""
    for kwargs in (dict(), dict(window_size=2), dict(frozen_kv=False), dict(tail_on_all=True)):
        model = build('EdgeRecViT', **kwargs)
        with pytest.MonkeyPatch.context() as mp:
            calls, projected, update = engine_work(token_adaptive, mp), [], edge_recvit.KVCache.update

            def recording_update(self, *args, update=update, projected=projected):
                new = update(self, *args)
                projected.append(new.total)
                return new

            mp.setattr(edge_recvit.KVCache, 'update', recording_update)
            stats = run(model, torch.randn(3, 3, 64, 48))[0].stats
        planned = [w for w in stats.blocks if w.queries > 0]
        assert len(planned) == len(calls) and all(same_work(p, c) for p, c in zip(planned, calls)), kwargs
        assert sum(w.new_kv for w in stats.blocks) * 3 == pytest.approx(sum(projected)), kwargs
        assert calls[-1].queries < calls[0].queries or kwargs.get('tail_on_all'), kwargs  # tokens did exit


def test_mor_vit_scales_its_capacities(monkeypatch):
    model = build('MoRViT', num_recursions=4)
    x = torch.randn(1, 3, 64, 64)
    stats = run(model, x)[0].stats
    default = [stats.scalars[f'sel/r{r}'].item() for r in range(4)]
    stats = run(model, x, 0.5)[0].stats
    scaled = [stats.scalars[f'sel/r{r}'].item() for r in range(4)]
    assert all(s <= d for s, d in zip(scaled, default)) and scaled != default
    assert model.capacities is None
    # The plan counts what the engine ran: every token subset of every recursion.
    calls = engine_work(token_adaptive, monkeypatch)
    stats = run(model, x)[0].stats
    shared = [w for w, step in zip(stats.blocks, range(model.depth)) if 0 < step < model.depth - 1]
    assert len(shared) == len(calls) == 4 and all(same_work(p, c) for p, c in zip(shared, calls))
    assert model.plan_flops(model.capacity_schedule, stats.grid) == pytest.approx(stats.flops)


def test_largest_within_rounds_down_and_falls_back_to_the_smallest():
    flops = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert largest_within(1.0, 5.0, flops.__getitem__, 5) == 4
    assert largest_within(0.7, 5.0, flops.__getitem__, 5) == 2
    assert largest_within(0.1, 5.0, flops.__getitem__, 5) == 0
    assert check_compute(None) is None and check_compute(1) == 1.0


@pytest.mark.parametrize('name', NAMES)
def test_two_threads_at_different_compute_on_one_model_each_get_their_own_result(name):
    """`compute` travels with the forward (an argument of `forward_states`), not on the module: two threads that run
    one model at the same time with different fractions each get exactly what that fraction gives alone."""
    import threading

    model = build(name)
    x = torch.randn(2, 3, 64, 48)
    fractions = (0.3, None)
    with torch.no_grad():
        refs = [model(x, compute=c) for c in fractions]
    assert not all(torch.equal(a, b) for a, b in zip(*refs))  # the two settings differ, so a leak would show
    start, results = threading.Barrier(2), {c: [] for c in fractions}

    def worker(compute):
        start.wait()
        with torch.no_grad():
            for _ in range(20):
                results[compute].append(model(x, compute=compute))

    threads = [threading.Thread(target=worker, args=(c,)) for c in fractions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for compute, ref in zip(fractions, refs):
        assert len(results[compute]) == 20
        assert all(torch.equal(a, b) for out in results[compute] for a, b in zip(out, ref)), (name, compute)
