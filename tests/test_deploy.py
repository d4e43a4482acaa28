"""Deployment (mmrecvit/deploy.py, issue 18): ONNX export + onnxruntime parity, torch.export and torch.compile
graph breaks for every backbone at a tiny size (the tool: tests/tools/test_pytorch2onnx.py)."""

import pytest
import torch
from backbone_cases import BACKBONE_CASES

from mmrecvit import deploy
from mmrecvit.models import BACKBONES
from mmrecvit.models.revit_fold import fold_to_plainvit
from mmrecvit.models.windows import Windows

PATCH = 16

SIZES = [(64, 64), (96, 128), (32, 48)]  # the export size first; 64x64 catches MoR's ceil(cap * Np) (Np = 16)

# The exportable execution of each backbone (deploy.py: the others have data-dependent token counts).
EXPORTABLE = {'EdgeRecViT': dict(execution='masked')}

STATIC = ['PlainViT', 'NaiveRecursiveViT', 'SRViT', 'ReViT', 'MoRViT']  # MoR: expert_choice (default)


def build(name, **extra):
    torch.manual_seed(0)
    return BACKBONES[name](**{**BACKBONE_CASES[name], **EXPORTABLE.get(name, {}), **extra}).eval()


@pytest.mark.slow
@pytest.mark.parametrize('name', list(BACKBONE_CASES))
def test_onnx_parity_dynamic(name, tmp_path):
    model = build(name)
    path = deploy.export_onnx(model, torch.randn(1, 3, *SIZES[0]), tmp_path / f'{name}.onnx', PATCH, dynamic=True)
    rows = deploy.onnx_parity(model, path, SIZES)
    assert {r.size for r in rows} == set(SIZES)
    assert len(rows) == len(SIZES) * len(model.out_indices)
    assert deploy.parity_ok(rows), deploy.format_parity(rows)


def randomise_tables(model):
    """Non-zero relative position tables (a trained model's), so that the biases are in the graph's numbers."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'rel_pos' in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return model


# Windowed and global steps both present, recursion included, at the smallest graph that has them (the
# exporter's time grows with the applications: SR-ViT at [2, 3, 2, 1] recursions took 75 s): PlainViT 2 steps,
# SR-ViT 3 (its first layer twice, windowed; the global last).
@pytest.mark.parametrize('rel_pos', [False, True], ids=['', 'rel_pos'])
@pytest.mark.parametrize(
    'name, extra',
    [
        ('PlainViT', dict(depth=2, global_steps=(1,))),
        ('SRViT', dict(depth=2, unit_sizes=[1, 1], num_recursions=[2, 1], global_steps=(2,))),
    ],
)
@pytest.mark.slow
def test_windowed_onnx_parity_dynamic_and_one_compiled_graph(name, extra, rel_pos, tmp_path):
    """Window attention (issue 17) exports with the layout following the input size (4 x 4 patches
    in windows of 3: padded; 6 x 8) and compiles without a graph break; so do ViTDet's relative position
    biases (issue 28), resized to the windows and to each input's global grid."""
    model = randomise_tables(build(name, window_size=3, use_rel_pos=rel_pos, **extra))
    windowed = [isinstance(s.layout, Windows) for s in model.steps(None, (4, 4))]
    assert any(windowed) and not all(windowed), 'no windowed and global steps'
    path = deploy.export_onnx(model, torch.randn(1, 3, *SIZES[0]), tmp_path / f'{name}.onnx', PATCH, dynamic=True)
    rows = deploy.onnx_parity(model, path, SIZES[:2])
    assert deploy.parity_ok(rows), deploy.format_parity(rows)
    torch._dynamo.reset()
    with torch.no_grad():
        explain = torch._dynamo.explain(model)(torch.randn(1, 3, 64, 64))
    assert explain.graph_break_count == 0, [str(b.reason)[:200] for b in explain.break_reasons]


@pytest.mark.slow
def test_onnx_folded_revit_parity(tmp_path):
    dense = fold_to_plainvit(build('ReViT'))
    path = deploy.export_onnx(dense, torch.randn(1, 3, 64, 64), tmp_path / 'folded.onnx', PATCH)
    rows = deploy.onnx_parity(dense, path, [(64, 64)])
    assert deploy.parity_ok(rows), deploy.format_parity(rows)


@pytest.mark.parametrize(
    'name, extra, argument',
    [
        ('EdgeRecViT', dict(execution='adaptive'), "execution='masked'"),
        ('MoRViT', dict(routing='token_choice'), "routing='expert_choice'"),
    ],
)
def test_data_dependent_modes_are_refused(name, extra, argument, tmp_path):
    model = build(name, **extra)
    with pytest.raises(ValueError, match=argument.replace('(', r'\(')) as info:
        deploy.export_onnx(model, torch.randn(1, 3, 64, 64), tmp_path / 'x.onnx', PATCH)
    assert repr(extra[next(iter(extra))]) in str(info.value)
    assert not (tmp_path / 'x.onnx').exists()


@pytest.mark.slow
@pytest.mark.parametrize('rel_pos', [False, True], ids=['', 'rel_pos'])
@pytest.mark.parametrize('name', list(BACKBONE_CASES))
def test_torch_export_dynamic(name, rel_pos):
    model = randomise_tables(build(name, use_rel_pos=rel_pos))
    x = torch.randn(1, 3, 64, 64)
    program = torch.export.export(model, (x,), dynamic_shapes=deploy.dynamic_hw(PATCH))
    x2 = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        for a, b in zip(program.module()(x2), model(x2)):
            assert a.shape == b.shape
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_torch_export_adaptive_edge_recvit():
    """The adaptive engine's token counts are data; traced (export, compile) it runs the masked reference instead
    (issue 48.3), which exports and computes what the eager engine computes."""
    model = build('EdgeRecViT', execution='adaptive')
    x = torch.randn(1, 3, 64, 64)
    exported = torch.export.export(model, (x,))
    for got, want in zip(exported.module()(x), model(x)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize('rel_pos', [False, True], ids=['', 'rel_pos'])
@pytest.mark.parametrize(
    'name, extra', [(n, {}) for n in STATIC + ['EdgeRecViT']] + [('EdgeRecViT', dict(execution='adaptive'))]
)
def test_compile_has_no_graph_break(name, extra, rel_pos):
    torch._dynamo.reset()
    model = build(name, use_rel_pos=rel_pos, **extra)  # EdgeRecViT: execution='masked'; 'adaptive' compiles as it
    with torch.no_grad():
        explain = torch._dynamo.explain(model)(torch.randn(1, 3, 64, 64))
    assert explain.graph_break_count == 0, [str(b.reason)[:200] for b in explain.break_reasons]
    assert explain.graph_count == 1


@pytest.mark.slow
def test_compile_token_choice_compiles_blocks():
    """MoR-ViT token choice (tests/models/test_compile.py: its graph count is bounded); Edge-RecViT's adaptive
    execution compiles as its masked reference, one graph (test_compile_has_no_graph_break)."""
    torch._dynamo.reset()
    model = build('MoRViT', routing='token_choice')
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        explain = torch._dynamo.explain(model)(x)
    # Breaks only where the token counts are read to the host and at each recursion's selection (kept eager); the
    # blocks between them are graphs.
    assert explain.graph_count > model.depth // 2
    reasons = ('_local_scalar_dense', 'item', 'torch.compiler.disable', 'skip')
    assert all(any(r in str(b.reason) for r in reasons) for b in explain.break_reasons), explain.break_reasons


@pytest.mark.slow
@pytest.mark.parametrize(
    'name, extra',
    [
        ('PlainViT', {}),
        ('EdgeRecViT', dict(execution='adaptive')),
        ('PlainViT', dict(use_rel_pos=True, window_size=3, global_steps=(3,))),
    ],
)
def test_compiled_equals_eager(name, extra):
    torch._dynamo.reset()
    model = randomise_tables(build(name, **extra))
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        for a, b in zip(torch.compile(model)(x), model(x)):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_eager_guard_still_checks_after_export():
    """The finiteness guard steps aside only while tracing; eagerly a NaN router still raises (read after the
    forward: `check_finite`, or the next forward)."""
    from mmrecvit.models.numerics import check_finite

    model = build('SRViT')
    torch.export.export(model, (torch.randn(1, 3, 64, 64),))
    with torch.no_grad():
        for p in model.routers.parameters():
            p.fill_(float('nan'))
    model(torch.randn(1, 3, 64, 64))
    with pytest.raises(FloatingPointError, match='non-finite'):
        check_finite(model)


def test_default_check_sizes():
    assert deploy.default_check_sizes((64, 64), 32, dynamic=False) == [(64, 64)]
    assert deploy.default_check_sizes((128, 128), 32, dynamic=True) == [(128, 128), (160, 192), (96, 96)]
    assert deploy.default_check_sizes((64, 64), 32, dynamic=True) == [(64, 64), (96, 128), (128, 96)]


# ---- segmentors with dynamic H, W (issue 41.8) ----------------------------------------------------------------
SEG_FAMILIES = [  # every ADE20K recipe family's base: its UperNet head as configured (channels, norms, bins)
    'configs/seg/_base_/upernet_vit_8xb2-160k_ade20k-512x512.py',
    'configs/seg/_base_/upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py',
    'configs/seg/_base_/upernet_vit-b_8xb2-amp-ld0.95-160k_ade20k-512x512.py',
    'configs/seg/_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py',
]


@pytest.mark.parametrize('bins', [1, 2, 3, 6, (2, None)])
def test_matmul_pooling_is_adaptive_average_pooling_at_every_size(bins):
    for H, W in [(2, 2), (5, 11), (8, 8), (9, 10), (16, 20), (31, 7)]:
        x = torch.randn(2, 3, H, W)
        ref = torch.nn.AdaptiveAvgPool2d(bins)(x)
        assert torch.allclose(deploy.AdaptiveAvgPoolMatmul(bins)(x), ref, atol=1e-6), (bins, H, W)


class HeadOnImage(torch.nn.Module):
    """A decode head fed an image: fixed 1x1 projections to its input widths, average-pooled to strides 4..32
    (dynamic-friendly: what varies with the size is the head's own computation)."""

    def __init__(self, head):
        super().__init__()
        self.head = head
        self.proj = torch.nn.ModuleList(torch.nn.Conv2d(3, c, 1) for c in head.in_channels)

    def forward(self, x):
        maps = [torch.nn.functional.avg_pool2d(p(x), 4 * 2**i) for i, p in enumerate(self.proj)]
        return (self.head(maps),)


@pytest.mark.slow
@pytest.mark.parametrize('config', SEG_FAMILIES, ids=lambda p: p.split('/')[-1].split('_ade20k')[0])
def test_each_seg_recipe_family_head_exports_dynamically_and_matches_at_unseen_sizes(config, tmp_path):
    """UPerHead's pyramid pooling (AdaptiveAvgPool2d, bins 1, 2, 3, 6) was exported at the export size's bins:
    max |ort - eager| 0.08 at other sizes. The sizes here give maps whose bins overlap unevenly (5, 7 px)."""
    from helpers import cached_config
    from mmengine.registry import init_default_scope

    import mmrecvit.mm  # noqa: F401  (registration)

    init_default_scope('mmseg')
    from mmseg.registry import MODELS

    torch.manual_seed(0)
    module = HeadOnImage(MODELS.build(cached_config(config).model.decode_head)).eval()
    path = deploy.export_onnx(module, torch.randn(1, 3, 128, 128), tmp_path / 'head.onnx', 32, dynamic=True)
    rows = deploy.onnx_parity(module, path, [(128, 128), (160, 224), (224, 192)])
    assert deploy.parity_ok(rows), deploy.format_parity(rows)
    pools = [type(m) for m in module.modules() if 'Pool' in type(m).__name__]
    assert pools and set(pools) == {torch.nn.AdaptiveAvgPool2d}  # the exported form was put back


def test_a_dynamic_export_refuses_adaptive_max_pooling_naming_the_module():
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.AdaptiveMaxPool2d(3))
    deploy.check_exportable(module)  # a static export computes it
    with pytest.raises(ValueError) as info:
        deploy.check_exportable(module, dynamic=True)
    assert str(info.value) == (
        '1: AdaptiveMaxPool2d cannot be exported with dynamic H, W: ONNX has no adaptive pooling and adaptive max '
        'pooling no fixed-kernel form; export at a fixed size'
    )
