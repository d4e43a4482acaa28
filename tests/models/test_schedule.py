"""The schedule a forward owns (mmrecvit/models/schedule.py, issue 47 item 4): built once per key of plain data,
kept across `.eval()`/`.train()`, following every knob set on a built model; the FLOP plan derived from it only when
read."""

from unittest import mock

import pytest
import torch
from backbone_cases import BACKBONE_CASES, tiny_backbone
from torch import nn

from mmrecvit.models import BACKBONES, ViTBackbone

pytestmark = pytest.mark.usefixtures('one_thread')
NAMES = sorted(BACKBONE_CASES)


def spread(model):
    """Edge-RecViT's untrained ranker spread over the depths, so images differ in their tokens."""
    if type(model).__name__ == 'EdgeRecViT':
        with torch.no_grad():
            model.ranker.fc2.weight.mul_(30.0)
    return model


@pytest.mark.parametrize('train', [False, True], ids=['eval', 'train'])
@pytest.mark.parametrize('name', NAMES + ['MoRViT token choice'])
def test_no_forward_derives_its_flop_plan_until_it_is_read(name, train):
    """A forward on new images derives no FLOP plan (`work`); reading the statistics' FLOPs derives it once."""
    kwargs = dict(routing='token_choice') if name.endswith('token choice') else {}
    model = spread(tiny_backbone(name.split()[0], **kwargs)).train(train)
    with mock.patch.object(model, 'work', wraps=model.work) as work:
        outs = [model(torch.randn(2, 3, 64, 48)) for _ in range(3)]
        assert work.call_count == 0
        flops = outs[-1].stats.flops
        assert work.call_count == 1 and flops > 0
        assert outs[-1].stats.flops == flops and work.call_count == 1  # derived once per forward's statistics


@pytest.mark.parametrize('name', NAMES)
def test_eval_and_train_keep_the_schedules_still_valid(name):
    """Switching the mode selects the schedules of that mode, built once: no forward builds steps again."""
    model = tiny_backbone(name)
    x = torch.randn(1, 3, 64, 48)
    for mode in (True, False):
        model.train(mode)(x)
    with mock.patch.object(model, 'build_steps', wraps=model.build_steps) as build:
        for mode in (True, False, True, False):
            model.train(mode)(x)
    assert build.call_count == 0
    assert ViTBackbone.__setattr__ is nn.Module.__setattr__  # no attribute set clears anything


# A knob set on a built model, and the same model built with it: its schedule keys follow the knob.
KNOBS = [
    ('PlainViT', dict(window_size=2)),  # 8 layers: windows but at the stage ends 1, 3, 5, 7
    ('PlainViT', dict(window_size=2, global_steps=(0,))),
    ('SRViT', dict(eval_recursions=[1, 2, 1, 1])),
    ('ReViT', dict(depth=6)),
    ('EdgeRecViT', dict(frozen_kv=False)),
    ('EdgeRecViT', dict(tail_on_all=True)),
    ('MoRViT', dict(capacities=[1.0, 0.5, 0.25])),
]


@pytest.mark.parametrize('name, knob', KNOBS, ids=[f'{n}-{"-".join(k)}' for n, k in KNOBS])
def test_a_knob_set_on_a_built_model_changes_the_next_forward(name, knob):
    built_with = dict(depth=8) if name == 'PlainViT' else {}
    model = spread(tiny_backbone(name, **built_with, window_size=2 if 'global_steps' in knob else 0)).eval()
    x = torch.randn(2, 3, 64, 48)
    with torch.no_grad():
        before = model(x)
        before.stats.flops  # noqa: B018  (derived and cached for the old knob)
        for key, value in knob.items():
            setattr(model, key, value)
        after = model(x)
        built = spread(tiny_backbone(name, **built_with, **knob)).eval()
        built.load_state_dict(model.state_dict())
        expected = model.__class__.forward(built, x)
    for a, b in zip(after, expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert after.stats.flops == expected.stats.flops
    assert after.stats.flops != before.stats.flops or any(not torch.equal(a, b) for a, b in zip(after, before))


def test_the_schedule_is_plain_data_cached_by_key():
    """Steps of the same key are the same object; a grid, a setting or the mode are other keys."""
    model = BACKBONES['SRViT'](**BACKBONE_CASES['SRViT'], window_size=2)
    steps = model.steps(None, (4, 4))
    assert model.steps(None, (4, 4)) is steps and model.steps(None, (5, 4)) is not steps
    assert model.steps((1, 1, 1, 1), (4, 4)) != steps and len(model.steps((1, 1, 1, 1), (4, 4))) == model.depth
    assert hash(steps) == hash(tuple(steps))  # hashable plain data: tuples of ints, floats and frozen layouts
    assert [s.index for s in steps] == list(range(model.num_steps)) and {s.drop_path_rate for s in steps} == {0.0}
