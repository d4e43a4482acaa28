"""torch.compile (issue 48.3): every method is one dynamo graph in training and in eval at a fixed input shape, and
no later call recompiles: new images of that shape, an optimizer step, Edge-RecViT's annealed temperature, reViT's
warm merged-FFN cache. The backend is a counting eager one (dynamo's graphs, no lowering: the test stays fast);
docs/deploy.md lists the graphs per method. The GPU check runs the same at the recipes' settings
(`benchmark/gpu_check_compile.py`)."""

import warnings

import pytest
import torch
from backbone_cases import BACKBONE_CASES
from torch._dynamo.testing import CompileCounter

from mmrecvit.adapters import TemperatureSchedule
from mmrecvit.models import BACKBONES

ITERATIONS = 3  # the first call compiles, the others must find its graph

# (name, extra arguments): every method at its default (EdgeRecViT's eval: execution='adaptive', compiled as 'masked'),
# and a code path the recipes add: with_cp and drop path, the per-image drop path of a token subset inside activation
# checkpointing (where dynamo refuses writes to objects made outside it).
STATIC = [
    ('PlainViT', {}),
    ('NaiveRecursiveViT', {}),
    ('SRViT', {}),
    ('ReViT', dict(step_drop_rate=0.0)),
    ('EdgeRecViT', {}),
    ('MoRViT', {}),
    ('MoRViT', dict(with_cp=True, drop_path_rate=0.1)),
]
NAMES = ['PlainViT', 'NaiveRecursiveViT', 'SRViT', 'ReViT', 'EdgeRecViT', 'MoRViT', 'MoRViT-with_cp']


def build(name, **extra):
    torch.manual_seed(0)
    return BACKBONES[name](**{**BACKBONE_CASES[name], **extra})


def images(seed):
    return torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(seed))


def compiled_graphs(model, train, iterations=ITERATIONS, every=False):
    """Graphs dynamo made at the first call, and at all later calls (new images of the same shape; in training an
    SGD step after each and the temperature annealed as `TemperatureScheduleHook` does); `every`: after each call."""
    torch._dynamo.reset()
    counter = CompileCounter()
    step = torch.compile(model.train(train), backend=counter)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    anneal = TemperatureSchedule(1.0, 0.1) if hasattr(model, 'gumbel_tau') else None
    counts = []
    for i in range(iterations):
        if train:
            if anneal is not None:
                anneal.apply(model, i, iterations)
            outs = step(images(i))
            loss = sum(o.square().mean() for o in outs) + sum(outs.stats.aux_losses.values())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                step(images(i))
        counts.append(counter.frame_count)
    return counts if every else (counts[0], counts[-1] - counts[0])


@pytest.mark.slow
@pytest.mark.parametrize('train', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('name, extra', STATIC, ids=NAMES)
def test_one_graph_and_no_recompile(name, extra, train):
    """And no warning: dynamo warned at every compile of every backbone ("a call to a `functools.lru_cache`-wrapped
    function ... silent incorrectness is only a potential risk"), at the layer indices' cache and reViT's router-logit
    labels'; traced, both are computed without their caches."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        graphs, recompiles = compiled_graphs(build(name, **extra), train)
    assert (graphs, recompiles) == (1, 0)
    assert not [f'{w.filename}:{w.lineno}: {w.message}' for w in caught]


@pytest.mark.slow
def test_revit_step_dropout_trains_in_one_graph():
    """Issue 48.1: step dropout draws its kept groups on the device with static shapes, one block call per step."""
    assert compiled_graphs(build('ReViT', step_drop_rate=0.3), train=True) == (1, 0)


@pytest.mark.slow
def test_token_choice_trains_in_one_graph():
    """MoR-ViT token choice trains on its masked path (static shapes, issue 48.2): one graph at the recipes' N_r = 10,
    no recompile over new images and optimizer steps."""
    model = build('MoRViT', routing='token_choice', num_recursions=10)
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):  # no silent eager fallback
        assert compiled_graphs(model, train=True) == (1, 0)


@pytest.mark.slow
def test_token_choice_eval_graphs_are_bounded():
    """MoR-ViT token choice's eval cannot be one graph: its recursions' token counts are data, read to the host once
    (issue 48.2). Dynamo splits at that read and at each recursion's selection (`TokenChoice.select`, kept out of
    the graphs: it would specialise on the recursion, one compile per recursion, past dynamo's recompile limit at the
    recipes' N_r = 10); the blocks between are graphs whose token counts become symbolic after the first new count
    (automatic dynamic shapes). So the graphs stop growing after a few images and no frame falls back to eager."""
    model = build('MoRViT', routing='token_choice', num_recursions=10)
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):  # no silent eager fallback
        counts = compiled_graphs(model, False, iterations=8, every=True)
    assert counts[-1] == counts[3] and counts[-1] <= counts[0] + 2, counts
