"""The shared suite: every registered backbone, tiny sizes, CPU (STYLE 9, issue 2 §4)."""

import math

import pytest
import torch
from backbone_cases import BACKBONE_CASES
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mmrecvit.models import BACKBONES, SimplePyramid

pytestmark = pytest.mark.usefixtures('one_thread')

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
    assert outs.stats is not None and outs.stats.grid == grid  # the statistics travel with the result


@pytest.mark.parametrize('name', NAMES)
def test_backward_reaches_every_parameter(name):
    model = build(name).train()
    outs = model(torch.randn(2, 3, 64, 80))
    loss = sum(o.square().mean() for o in outs)
    loss = loss + sum(v for v in outs.stats.aux_losses.values())
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
        (sum(o.sum() for o in y) + sum(y.stats.aux_losses.values(), torch.zeros(()))).backward()
        outs.append((y, {n: p.grad for n, p in model.named_parameters()}))
    for a, b in zip(outs[0][0], outs[1][0]):
        torch.testing.assert_close(a, b)
    for n, g in outs[0][1].items():
        torch.testing.assert_close(g, outs[1][1][n], msg=n)


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize(
    'kwargs, exc, words',
    [
        (dict(embed_dim=30, num_heads=4), ValueError, ['embed_dim', 'num_heads']),
        (dict(arch='huge'), ValueError, ['arch', 'tiny', 'small', 'base']),
        (dict(drop_path_rate=1.5), ValueError, ['drop_path_rate']),
        (dict(patch_size=0), ValueError, ['patch_size']),
        (dict(with_cp='yes'), TypeError, ['with_cp']),
        (dict(init_cfg=dict(type='Kaiming')), ValueError, ["init_cfg['type']", 'Pretrained']),
        (
            dict(pretrained='a.pth', init_cfg=dict(type='Pretrained', checkpoint='b.pth')),
            ValueError,
            ['pretrained', 'init_cfg'],
        ),
        (dict(out_indices=[99]), ValueError, ['out_indices']),
    ],
)
def test_bad_arguments_name_the_argument(name, kwargs, exc, words):
    with pytest.raises(exc) as info:
        build(name, **kwargs)
    for w in words:
        assert w in str(info.value), f'{w!r} not in error: {info.value}'


@pytest.mark.parametrize('name', NAMES)
def test_smaller_than_a_patch_is_a_clear_error(name):
    with pytest.raises(ValueError, match='smaller than one 16x16 patch'):
        build(name)(torch.randn(1, 3, 8, 40))


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_every_method_has_a_large_size(name):
    with torch.device('meta'):
        model = BACKBONES[name](arch='large')
    assert model.embed_dim == 1024 and model.num_heads == 16 and model.depth == 24
    assert model.num_steps == (96 if name == 'SRViT' else 24)  # SR-ViT-L: 24 layers, 4 recursions each


PATCH, MAX_SIDE, MAX_AREA = 16, 1333, 512 * 512

NUM_EXAMPLES, MIN_DISTINCT_SIZES = 270, 200

# Fewer blocks than the shared tiny cases (the fuzz is about shapes; every mechanism is still on:
# units with T >= 2, two experts, a shared middle step, two routed recursions) and drop path on.
FEWER_BLOCKS = {
    'PlainViT': dict(depth=2),
    'NaiveRecursiveViT': dict(depth=3, num_blocks=2),
    'SRViT': dict(depth=2, unit_sizes=[1, 1], num_recursions=[2, 1]),
    'ReViT': dict(depth=3, num_experts=2),
    'EdgeRecViT': dict(depth=3),
    'MoRViT': dict(num_recursions=2),
}


@pytest.fixture(scope='module')
def models():
    torch.set_num_threads(1)
    assert sorted(FEWER_BLOCKS) == sorted(BACKBONES)
    return {
        name: BACKBONES[name](**{**BACKBONE_CASES[name], **FEWER_BLOCKS[name], 'drop_path_rate': 0.1})
        for name in sorted(BACKBONES)
    }


@st.composite
def image_batches(draw):
    h = draw(st.integers(PATCH, MAX_SIDE))
    w = draw(st.integers(PATCH, max(PATCH, min(MAX_SIDE, MAX_AREA // h))))
    return h, w, draw(st.integers(1, 3))


def check_maps(outs, batch, dim, grid, what):
    assert isinstance(outs, tuple), what
    for i, o in enumerate(outs):
        assert o.shape == (batch, dim, *grid), f'{what}: map {i} has shape {tuple(o.shape)}'
        assert torch.isfinite(o).all(), f'{what}: map {i} is not finite'


@pytest.mark.slow
def test_every_backbone_and_the_neck_on_random_image_sizes(models):
    seen = set()
    dim = next(iter(models.values())).embed_dim
    neck = SimplePyramid(dim).eval()

    @settings(
        max_examples=NUM_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(image_batches())
    @example((MAX_SIDE, MAX_SIDE, 1))
    @example((PATCH, MAX_SIDE, 3))
    @example((MAX_SIDE, PATCH, 2))
    @example((PATCH, PATCH, 3))
    @example((PATCH + 1, 2 * PATCH - 1, 2))
    def check(size):
        h, w, batch = size
        seen.add((h, w))
        x = torch.randn(batch, 3, h, w, generator=torch.Generator().manual_seed(h * 4096 + w))
        grid = (math.ceil(h / PATCH), math.ceil(w / PATCH))
        four_maps = None
        for name, model in models.items():
            for train in (False, True):
                model.train(train)
                torch.manual_seed(h + w)  # the training-mode draws, reproducibly
                with torch.set_grad_enabled(train):
                    outs = model(x)
                what = f'{name} {"train" if train else "eval"} {batch}x3x{h}x{w}'
                assert len(outs) == len(model.out_indices), what
                check_maps(outs, batch, dim, grid, what)
                assert outs.stats.grid == grid, what
                four_maps = outs if len(outs) == 4 else four_maps
        with torch.no_grad():
            pyramid = neck(four_maps)
        expect = [
            (dim // 4, 4 * grid[0], 4 * grid[1]),
            (dim // 2, 2 * grid[0], 2 * grid[1]),
            (dim, *grid),
            (dim, math.ceil(grid[0] / 2), math.ceil(grid[1] / 2)),
        ]
        assert [tuple(p.shape) for p in pyramid] == [(batch, *e) for e in expect], f'neck at {h}x{w}'
        assert all(torch.isfinite(p).all() for p in pyramid)

    check()
    print(f'{len(seen)} distinct sizes')
    assert len(seen) >= MIN_DISTINCT_SIZES, f'only {len(seen)} distinct sizes were tried'
    sides = [s for hw in seen for s in hw]
    assert min(sides) == PATCH and max(sides) == MAX_SIDE


@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)  # the autouse seed fixture: harmless
@given(h=st.integers(1, MAX_SIDE), w=st.integers(1, PATCH - 1), transpose=st.booleans(), batch=st.integers(1, 3))
def test_smaller_than_a_patch_is_a_value_error_for_every_backbone(models, h, w, transpose, batch):
    h, w = (w, h) if transpose else (h, w)
    x = torch.zeros(batch, 3, h, w)
    for model in models.values():
        for train in (False, True):
            model.train(train)
            with pytest.raises(ValueError, match=f'input of {h}x{w} pixels is smaller than one 16x16 patch'):
                model(x)
