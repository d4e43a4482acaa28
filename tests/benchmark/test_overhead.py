"""The Python overhead benchmark (mmrecvit/benchmark/overhead.py, issue 39 item 2): library calls are counted
exactly, so the call targets are checked here; latencies only in the benchmark itself (`make bench`)."""

import pytest
import timm
import torch

from mmrecvit.benchmark.overhead import count_calls, format_table, frames_to_attention, measure, timm_forward
from mmrecvit.models import BACKBONES

pytestmark = pytest.mark.usefixtures('one_thread')

TINY = dict(arch='tiny', embed_dim=64, num_heads=2, img_size=32)


def rows(names):
    vit = timm.create_model('vit_tiny_patch16_224', num_classes=0, img_size=32, embed_dim=64, num_heads=2)
    models = {'timm': (vit, timm_forward(vit))}
    models.update({name: (model := BACKBONES[name](**TINY), model) for name in names})
    return {r.label: r for r in measure(models, size=32, repeats=0)}


def test_calls_are_counted_in_the_library_only():
    calls = count_calls(lambda: torch.nn.functional.relu(torch.zeros(1)))
    assert sum(calls.values()) == 0  # torch's own functions do not count
    model = BACKBONES['PlainViT'](**TINY).eval()
    with torch.inference_mode():
        calls = count_calls(lambda: model(torch.zeros(1, 3, 32, 32)))
    assert calls[('backbone.py', 'iter_layers')] == model.depth + 1  # the loop resumed once per layer, once to end


def test_library_frames_from_forward_to_attention():
    """How deep a reader follows a forward down to attention (issue 47 item 2): PlainViT at most 5 frames of our code
    (timm's ViT: 3 from `forward_intermediates`; ours: `forward`, `forward_states`, `iter_layers`, `Block.forward`,
    `Attention.forward`), the recursive methods' generators as deep; the token engines' subset steps go through
    `run_subset` and `attention.attend`'s rows path (Edge-RecViT and MoR-ViT took 11-12 and 10 before)."""
    x = torch.zeros(1, 3, 32, 32)
    vit = timm.create_model('vit_tiny_patch16_224', num_classes=0, img_size=32, embed_dim=64, num_heads=2).eval()
    frames = {'timm': frames_to_attention(lambda: timm_forward(vit)(x))}
    for name in BACKBONES:
        model = BACKBONES[name](**TINY).eval()
        with torch.inference_mode():
            frames[name] = frames_to_attention(lambda m=model: m(x))
            frames[name, 'intermediates'] = frames_to_attention(lambda m=model: m.forward_intermediates(x))
    assert frames['timm'] == (3, 3)
    for name in ('PlainViT', 'NaiveRecursiveViT', 'SRViT', 'ReViT'):
        assert frames[name] == frames[name, 'intermediates'] == (5, 5), (name, frames[name])
    for name in ('EdgeRecViT', 'MoRViT'):
        assert frames[name][1] <= 9, (name, frames[name])


def test_plainvit_calls_at_most_1_5x_timms_and_recursion_adds_at_most_10_percent_per_application():
    got = rows(['PlainViT', 'NaiveRecursiveViT', 'SRViT', 'ReViT'])
    assert got['PlainViT'].applications == got['timm'].applications == 12
    assert got['PlainViT'].calls <= 1.5 * got['timm'].calls, (got['PlainViT'].calls, got['timm'].calls)
    per_application = got['PlainViT'].calls_per_application
    assert got['SRViT'].applications == 48  # T = 4 recursions of the 12 layers
    for name in ('NaiveRecursiveViT', 'SRViT', 'ReViT'):
        assert got[name].calls_per_application <= 1.1 * per_application, (name, got[name], per_application)
    assert got['PlainViT'].calls_new == got['PlainViT'].calls and got['PlainViT'].frames == (5, 5)
    table = format_table(list(got.values()), reference='timm', per_application_reference='PlainViT')
    assert table.count('\n') == 1 + len(got) and f'| PlainViT | 12 | 5 | {got["PlainViT"].calls} |' in table
