"""`forward_intermediates` with timm's semantics (issue 39 item 4): the one way to get features, which `forward`
(mmdet/mmseg/mmpretrain, detectron2) and the timm classifier call; `prune_intermediate_layers` as timm's."""

import pytest
import torch
from backbone_cases import BACKBONE_CASES, tiny_backbone
from timm.models.vision_transformer import VisionTransformer

from mmrecvit.models import BACKBONES, ForwardStats, PlainViT

pytestmark = pytest.mark.usefixtures('one_thread')

TINY = dict(arch='tiny', embed_dim=32, num_heads=2, img_size=64)


@pytest.fixture(scope='module')
def twins():
    """timm's ViT and our PlainViT with its weights (final norm included)."""
    torch.manual_seed(0)
    vit = VisionTransformer(
        img_size=64, patch_size=16, embed_dim=32, depth=6, num_heads=2, num_classes=0, dynamic_img_size=True
    ).eval()
    with torch.no_grad():
        for p in vit.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # no unit norms or zero biases: every tensor matters
    ours = PlainViT(**TINY, depth=6, final_norm=True).eval()
    ours.load_state_dict(vit.state_dict(), strict=True)
    return vit, ours


CALLS = [
    dict(),
    dict(indices=2),
    dict(indices=[0, -1], norm=True),
    dict(indices=[4, 1], output_fmt='NLC'),
    dict(indices=3, intermediates_only=True, stop_early=True),
    dict(indices=[1, 2], output_fmt='NLC', return_prefix_tokens=True),
    dict(indices=[5], norm=True, stop_early=True),
]


@pytest.mark.parametrize('kwargs', CALLS, ids=[str(k) for k in CALLS])
def test_plainvit_returns_what_timm_returns(twins, kwargs):
    vit, ours = twins
    x = torch.randn(2, 3, 64, 80)  # 4 x 5 patches
    with torch.no_grad():
        theirs, mine = vit.forward_intermediates(x, **kwargs), ours.forward_intermediates(x, **kwargs)
    assert type(mine) is type(theirs)  # timm's types: a list, or (tensor, list)
    torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_every_backbone_speaks_timm_and_forward_reads_the_same_states(name):
    model = tiny_backbone(name).eval()
    x = torch.randn(2, 3, 64, 80)
    L, grid = model.depth, (4, 5)
    with torch.no_grad():
        final, maps = model.forward_intermediates(x)
        nlc = model.forward_intermediates(x, indices=[-1, 0], output_fmt='NLC', intermediates_only=True)
        (_, taken), stats = model.forward_intermediates(x, indices=2, return_stats=True)
        outs = model(x)
    assert final.shape == (2, 1 + 20, model.embed_dim) and len(maps) == L  # indices=None: every layer
    assert all(m.shape == (2, model.embed_dim, *grid) and m.is_contiguous() for m in maps)
    assert [n.shape for n in nlc] == [(2, 20, model.embed_dim)] * 2  # prefix tokens dropped, layers in order
    torch.testing.assert_close(nlc[1], maps[-1].flatten(2).transpose(1, 2))
    assert len(taken) == 2 and isinstance(stats, ForwardStats) and stats.grid == grid
    for layer, out in zip(model.out_indices, outs):
        expected = maps[layer]
        if layer == L - 1 and name == 'EdgeRecViT':  # final_norm=True: mmpretrain's final norm on the last map
            expected = final[:, 1:].transpose(1, 2).reshape(2, -1, *grid)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_stop_early_runs_no_layer_after_the_last_taken():
    model = tiny_backbone('PlainViT').eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        _, early = model.forward_intermediates(x, indices=[1], stop_early=True, return_stats=True)
        (final, _), full = model.forward_intermediates(x, indices=[1], return_stats=True)
        (final_early, (state,)), _ = model.forward_intermediates(
            x, [1], output_fmt='NLC', stop_early=True, return_stats=True
        )
    assert len(early.blocks) == 2 and len(full.blocks) == model.depth
    torch.testing.assert_close(final_early[:, 1:], state)  # the final state is the last layer run's (norm: identity)


@pytest.mark.parametrize(
    'kwargs, exc, words',
    [
        (dict(indices=5), ValueError, ['indices', 'last-n (5) is out of range (1 to 4)']),
        (dict(indices=[0, 4]), ValueError, ['indices entry', '[-4, 3]', '4']),
        (dict(indices=[]), ValueError, ['indices', 'at least one layer']),
        (dict(indices='last'), TypeError, ['indices', 'an int', "'last'"]),
        (dict(indices=[1.5]), TypeError, ['indices entry', 'int']),
        (dict(output_fmt='NHWC'), ValueError, ['output_fmt', "'NCHW'", "'NLC'", 'NHWC']),
    ],
)
def test_bad_arguments_are_one_clear_error(kwargs, exc, words):
    model = tiny_backbone('PlainViT')
    with pytest.raises(exc) as info:
        model.forward_intermediates(torch.randn(1, 3, 32, 32), **kwargs)
    message = str(info.value)
    assert len(message.splitlines()) == 1 and all(w in message for w in words), message


def test_prune_cuts_the_layers_of_dense_models_as_timm_does():
    for name in ('PlainViT', 'NaiveRecursiveViT'):
        model = BACKBONES[name](**{**BACKBONE_CASES[name], 'depth': 6}).eval()
        x = torch.randn(1, 3, 64, 64)
        with torch.no_grad():
            before = model.forward_intermediates(x, indices=[1, 3], intermediates_only=True)
        unique = len(model.blocks)
        assert model.prune_intermediate_layers([1, -3], prune_norm=True) == [1, 3]
        assert model.depth == 4 and len(model.blocks) == min(unique, 4) and model.out_indices == (1, 3)
        assert not any(k.startswith('blocks.4') for k in model.state_dict())
        with torch.no_grad():
            after = model.forward_intermediates(x, indices=[1, 3], intermediates_only=True)
            maps = model(x)
        torch.testing.assert_close(after, before, rtol=0, atol=0)
        torch.testing.assert_close(list(maps), after, rtol=0, atol=0)


@pytest.mark.parametrize('name', ['SRViT', 'ReViT', 'EdgeRecViT', 'MoRViT'])
def test_prune_cuts_what_no_kept_step_of_a_recursive_model_reaches(name):
    """Issue 48.4: as timm's, for every method (`pruning.prune`); reViT's one block runs at every step: kept."""
    model = tiny_backbone(name).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        before = model.forward_intermediates(x, indices=[0], intermediates_only=True, stop_early=True)
    keys = set(model.state_dict())
    assert model.prune_intermediate_layers(2) == [model.depth - 2, model.depth - 1]  # nothing to cut
    assert set(model.state_dict()) == keys and model.pruned_keys == frozenset()
    assert model.prune_intermediate_layers([0]) == [0]
    assert model.pruned_keys == keys - set(model.state_dict())
    assert (model.kept_layers == model.depth) == (name == 'ReViT') == (model.pruned_keys == frozenset())
    with torch.no_grad():
        after = model.forward_intermediates(x, indices=[0], intermediates_only=True, stop_early=True)
    torch.testing.assert_close(after, before, rtol=0, atol=0)
