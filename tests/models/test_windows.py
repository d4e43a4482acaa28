"""Window attention (ViTDet) as a per-application schedule, for every backbone and execution path."""

import pytest
import torch
import torch.nn.functional as F
from backbone_cases import BACKBONE_CASES, traced_with_stats

from mmrecvit.benchmark import force_mean_depth
from mmrecvit.models import BACKBONES, attention, windows

pytestmark = pytest.mark.usefixtures('one_thread')


def reference_window_attention(q, k, v, grid, size, num_prefix, num_heads, key_valid=None, rel_pos=None):
    """Dense attention with the window rule as an explicit (N, N) mask: patch i sees patch j of its
    window and the prefix tokens; a prefix token sees everything; invalid keys are masked."""
    B, N, D = q.shape
    h, w = grid
    rows = torch.arange(h * w) // w // size
    cols = torch.arange(h * w) % w // size
    window = torch.cat([torch.full((num_prefix,), -1), rows * 10_000 + cols])
    prefix = window < 0
    allowed = (window[:, None] == window[None, :]) | prefix[None, :] | prefix[:, None]  # (N, N)
    mask = allowed.expand(B, N, N)
    if key_valid is not None:  # a query without any valid allowed key falls back to all allowed keys
        mask = mask & key_valid[:, None, :]
        mask = mask | (~mask.any(-1, keepdim=True) & allowed[None])
    mask = mask[:, None]  # (B, 1, N, N)
    H, d = num_heads, D // num_heads
    heads = [t.view(B, N, H, d).transpose(1, 2) for t in (q, k, v)]
    return F.scaled_dot_product_attention(*heads, attn_mask=mask).transpose(1, 2).reshape(B, N, D)


# Every backbone with windows of 2 on a 5 x 3 grid (padded windows) and one global step; token-adaptive
# ones on varied active tokens, in both executions.
CASES = [(name, {}) for name in sorted(BACKBONES)] + [
    ('EdgeRecViT', dict(execution='masked')),
    ('EdgeRecViT', dict(frozen_kv=False)),
    ('MoRViT', dict(routing='token_choice')),
    ('SRViT', dict(readout='hard')),
]


def build(name, **kwargs):
    torch.manual_seed(0)
    model = BACKBONES[name](**{**BACKBONE_CASES[name], 'window_size': 2, **kwargs})
    if name == 'EdgeRecViT':
        force_mean_depth(model, 3.0, 1)
    if name == 'MoRViT' and model.routing == 'expert_choice':
        model.capacities = [1.0, 0.6, 0.3]
    return model


@pytest.mark.parametrize('train', [False, True], ids=['eval', 'train'])
@pytest.mark.parametrize(
    'name, kwargs', CASES, ids=[f'{n}{"-" + "-".join(map(str, k.values())) if k else ""}' for n, k in CASES]
)
def test_window_attention_equals_the_masked_dense_reference(name, kwargs, train, monkeypatch):
    model = build(name, **kwargs).train(train)
    x = torch.randn(2, 3, 80, 48)  # 5 x 3 patches: windows of 2 need padding
    torch.manual_seed(1)
    fast = model(x)
    monkeypatch.setattr(attention, 'window_attention', reference_window_attention)  # dense and token-subset paths
    torch.manual_seed(1)
    ref = model(x)
    for a, b in zip(fast, ref):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_the_schedule_decides_which_steps_are_windowed():
    model = BACKBONES['PlainViT'](**BACKBONE_CASES['PlainViT'], window_size=2)
    assert [model.layout(t, (4, 4)) is None for t in range(4)] == [True, True, True, True]  # 4 blocks: all stage ends
    model = BACKBONES['PlainViT'](**{**BACKBONE_CASES['PlainViT'], 'depth': 8}, window_size=2)
    assert [model.layout(t, (4, 4)) is None for t in range(8)] == [t in (1, 3, 5, 7) for t in range(8)]
    model.global_steps = (0,)
    assert [model.layout(t, (4, 4)) is None for t in range(8)] == [t == 0 for t in range(8)]
    srvit = BACKBONES['SRViT'](**BACKBONE_CASES['SRViT'], window_size=2)
    # every application of the global layers (the stage ends 0, 2, 3, 5 of 6, and 4, the last layer of the unit
    # [4] that holds none), in every recursion of the units [0, 1] x 2, [2, 3] x 3, [4] x 2, [5] x 1 (issue 37)
    assert srvit.global_layers == (0, 2, 3, 4, 5)
    assert [s.layer for s in srvit.steps(None, (4, 4)) if s.layout is None] == [0, 0, 2, 3, 2, 3, 2, 3, 4, 4, 5]


@pytest.mark.parametrize('name', ['PlainViT', 'SRViT', 'ReViT', 'NaiveRecursiveViT'])
def test_windowed_flops_equal_mmengine_and_drop(name):
    kwargs = dict(BACKBONE_CASES[name])
    kwargs['depth'] = 6 if name == 'SRViT' else 8
    dense = BACKBONES[name](**kwargs).eval()
    windowed = BACKBONES[name](**kwargs, window_size=2).eval()
    x = torch.randn(1, 3, 128, 128)  # 8 x 8 patches: 16 windows
    flops = {}
    for label, model in (('dense', dense), ('windowed', windowed)):
        with torch.no_grad():
            model(x)
        traced, stats = traced_with_stats(model, x)  # mmengine: 2 x MACs of matmuls and SDPA calls
        assert stats.flops == pytest.approx(traced, rel=1e-12), label
        flops[label] = traced
    assert flops['windowed'] < flops['dense']


def test_padding_does_not_change_the_result():
    """A windowed model gives the same output for a grid that needs padding whatever it is padded with."""
    q, k, v = (torch.randn(1, 1 + 15, 8) for _ in range(3))
    out = attention.window_attention(q, k, v, (5, 3), 2, 1, 2)
    torch.testing.assert_close(out, reference_window_attention(q, k, v, (5, 3), 2, 1, 2), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize('grid, size', [((4, 4), 3), ((6, 8), 3), ((5, 7), 2), ((3, 3), 3), ((2, 5), 4), ((1, 1), 2)])
def test_partition_is_timms_window_partition_bit_for_bit(grid, size):
    """`windows.partition`/`unpartition` (written from the window counts, for torch.export) compute what timm's
    `window_partition`/`window_unpartition` compute, padded or not, and their gradients."""
    from timm.models.vision_transformer_sam import window_partition, window_unpartition

    x = torch.randn(2, grid[0] * grid[1], 5, requires_grad=True)
    ours = windows.partition(x, grid, size)
    theirs, padded = window_partition(x.reshape(2, *grid, 5), size)
    assert torch.equal(ours, theirs.flatten(1, 2))
    g = torch.randn_like(ours)
    (ours_grad,) = torch.autograd.grad(ours, x, g)
    (theirs_grad,) = torch.autograd.grad(theirs.flatten(1, 2), x, g)
    assert torch.equal(ours_grad, theirs_grad)
    back = windows.unpartition(g, grid, size)
    assert torch.equal(back, window_unpartition(g.unflatten(1, (size, size)), size, grid, padded).flatten(1, 2))
    assert windows.Windows(grid, size, 0).num_windows == ours.shape[0] // 2
