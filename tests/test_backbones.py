"""The shared suite: every registered backbone, tiny sizes, CPU (STYLE 9, issue 2 §4)."""
import pytest
import torch
from backbone_cases import BACKBONE_CASES

from mmrecvit.models import BACKBONES

NAMES = sorted(BACKBONES)


def build(name, **overrides):
    return BACKBONES[name](**{**BACKBONE_CASES[name], **overrides})


def test_every_backbone_has_a_case():
    assert sorted(BACKBONE_CASES) == NAMES


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('hw', [(224, 224), (31, 31), (112, 137), (234, 345)])
def test_output_shapes(name, hw):
    model = build(name).eval()
    x = torch.randn(2, 3, *hw)
    with torch.no_grad():
        outs = model(x)
    grid = (-(-hw[0] // 16), -(-hw[1] // 16))  # padded to the patch size
    assert isinstance(outs, tuple) and len(outs) == len(model.out_indices)
    for o in outs:
        assert o.shape == (2, model.embed_dim, *grid)
        assert o.is_contiguous()  # NCHW in memory: mmcv's RoIAlign misreads other layouts (test_mmcv_ops.py)
        assert torch.isfinite(o).all()
    assert model.stats is not None and model.stats.grid == grid


@pytest.mark.parametrize('name', NAMES)
def test_backward_reaches_every_parameter(name):
    model = build(name).train()
    outs = model(torch.randn(2, 3, 64, 80))
    loss = sum(o.square().mean() for o in outs)
    loss = loss + sum(v for v in model.stats.aux_losses.values())
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, f'no gradient for {missing}'


@pytest.mark.parametrize('name', NAMES)
def test_state_dict_round_trip_is_strict_and_exact(name):
    a, b = build(name).eval(), build(name).eval()
    b.load_state_dict(a.state_dict(), strict=True)
    x = torch.randn(1, 3, 48, 64)
    with torch.no_grad():
        for oa, ob in zip(a(x), b(x)):
            torch.testing.assert_close(oa, ob, rtol=0, atol=0)


@pytest.mark.parametrize('name', NAMES)
def test_eval_is_deterministic(name):
    model = build(name).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        first, second = model(x), model(x)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


@pytest.mark.parametrize('name', NAMES)
def test_with_cp_keeps_outputs_and_gradients(name):
    torch.manual_seed(1)
    plain = build(name).train()
    ckpt = build(name, with_cp=True).train()
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 48, 48)
    outs = []
    for model in (plain, ckpt):
        torch.manual_seed(2)  # same stochastic choices (drop path, routing noise) in both
        y = model(x)
        (sum(o.sum() for o in y) + sum(model.stats.aux_losses.values(), torch.zeros(()))).backward()
        outs.append((y, {n: p.grad for n, p in model.named_parameters()}))
    for a, b in zip(outs[0][0], outs[1][0]):
        torch.testing.assert_close(a, b)
    for n, g in outs[0][1].items():
        torch.testing.assert_close(g, outs[1][1][n], msg=n)


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('kwargs, exc, words', [
    (dict(embed_dim=30, num_heads=4), ValueError, ['embed_dim', 'num_heads']),
    (dict(arch='huge'), ValueError, ['arch', 'tiny', 'small', 'base']),
    (dict(drop_path_rate=1.5), ValueError, ['drop_path_rate']),
    (dict(patch_size=0), ValueError, ['patch_size']),
    (dict(with_cp='yes'), TypeError, ['with_cp']),
    (dict(init_cfg=dict(type='Kaiming')), ValueError, ["init_cfg['type']", 'Pretrained']),
    (dict(pretrained='a.pth', init_cfg=dict(type='Pretrained', checkpoint='b.pth')), ValueError,
     ['pretrained', 'init_cfg']),
    (dict(out_indices=[99]), ValueError, ['out_indices']),
])
def test_bad_arguments_name_the_argument(name, kwargs, exc, words):
    if 'out_indices' in kwargs and 'out_indices' not in BACKBONES[name].__init__.__code__.co_varnames:
        pytest.skip(f'{name} names its outputs differently (covered by its own tests)')
    with pytest.raises(exc) as info:
        build(name, **kwargs)
    for w in words:
        assert w in str(info.value), f'{w!r} not in error: {info.value}'


@pytest.mark.parametrize('name', NAMES)
def test_smaller_than_a_patch_is_a_clear_error(name):
    with pytest.raises(ValueError, match='smaller than one 16x16 patch'):
        build(name)(torch.randn(1, 3, 8, 40))
