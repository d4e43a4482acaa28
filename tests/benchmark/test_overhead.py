"""The Python overhead benchmark (mmrecvit/benchmark/overhead.py, issue 39 item 2): library calls are counted
exactly, so the call targets are checked here; latencies only in the benchmark itself (`make bench`)."""

import pytest
import timm
import torch

from mmrecvit.benchmark.overhead import count_calls, format_table, measure, timm_forward
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
    assert calls[('backbone.py', 'run_block')] == model.depth  # one block execution per layer


def test_plainvit_calls_at_most_1_5x_timms_and_recursion_adds_at_most_10_percent_per_application():
    got = rows(['PlainViT', 'NaiveRecursiveViT', 'SRViT', 'ReViT'])
    assert got['PlainViT'].applications == got['timm'].applications == 12
    assert got['PlainViT'].calls <= 1.5 * got['timm'].calls, (got['PlainViT'].calls, got['timm'].calls)
    per_application = got['PlainViT'].calls_per_application
    assert got['SRViT'].applications == 48  # T = 4 recursions of the 12 layers
    for name in ('NaiveRecursiveViT', 'SRViT', 'ReViT'):
        assert got[name].calls_per_application <= 1.1 * per_application, (name, got[name], per_application)
    table = format_table(list(got.values()), reference='timm', per_application_reference='PlainViT')
    assert table.count('\n') == 1 + len(got) and '| PlainViT | 12 |' in table
