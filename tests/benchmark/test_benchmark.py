"""The benchmark harness: spec parsing, scheduling, arithmetic, reports and a tiny end-to-end run.

Smoke and logic tests only: nothing here asserts a timing (benchmarks are scripts/benchmarks.sh).
"""

import ast
import csv
import importlib.util
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from mmrecvit import benchmark as bm
from mmrecvit.benchmark import BenchConfig, BenchResult, Row, SpecError, parse_spec, parse_specs
from mmrecvit.models import EdgeRecViT, PlainViT

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / 'tools' / 'analysis_tools' / 'benchmark.py'


def load_tool():
    spec = importlib.util.spec_from_file_location('benchmark_tool', TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- specs ----------------------------------------------------------------------------------------
def test_parse_backbone_spec_with_literal_kwargs():
    s = parse_spec(
        "PlainViT(arch='small', depth=4, out_indices=(0, -1), img_size=[224, 320], "
        "init_values=None, qkv_bias=False, drop_path_rate=-0.0, extra={'a': 1e-3})"
    )
    assert (s.kind, s.target, s.label) == ('backbone', 'PlainViT', s.text)
    assert s.kwargs == dict(
        arch='small',
        depth=4,
        out_indices=(0, -1),
        img_size=[224, 320],
        init_values=None,
        qkv_bias=False,
        drop_path_rate=-0.0,
        extra={'a': 1e-3},
    )


@pytest.mark.parametrize(
    'text, label, kind, target, kwargs',
    [
        ('PlainViT', 'PlainViT', 'backbone', 'PlainViT', {}),
        ('ours=PlainViT(arch="s")', 'ours', 'backbone', 'PlainViT', dict(arch='s')),
        ('T 4 = PlainViT(depth=4)', 'T 4', 'backbone', 'PlainViT', dict(depth=4)),
        ('timm:vit_small_patch16_224', 'timm:vit_small_patch16_224', 'timm', 'vit_small_patch16_224', {}),
        ('ref=timm:vit_tiny_patch16_224(depth=2)', 'ref', 'timm', 'vit_tiny_patch16_224', dict(depth=2)),
        ('configs/det/x_toy.py', 'x_toy', 'config', 'configs/det/x_toy.py', {}),
        ('configs/seg/y.py(depth=8)', 'y(depth=8)', 'config', 'configs/seg/y.py', dict(depth=8)),
        ('cap-half=configs/y.py(whole=True)', 'cap-half', 'config', 'configs/y.py', dict(whole=True)),
    ],
)
def test_parse_spec_kinds_and_labels(text, label, kind, target, kwargs):
    s = parse_spec(text)
    assert (s.label, s.kind, s.target, s.kwargs) == (label, kind, target, kwargs)


@pytest.mark.parametrize(
    'text, words',
    [
        ("PlainViT(depth=__import__('os').getpid())", ['depth', 'literal']),
        ('PlainViT(depth=2 * x)', ['depth', 'literal', '2 * x']),
        ('PlainViT(arch=small)', ['arch', 'literal']),
        ('PlainViT(4)', ['positional']),
        ('PlainViT(**cfg)', ['**cfg']),
        ('PlainViT(depth=)', ['cannot parse']),
        ('PlainViT(a=1)+(2)', ['one argument list']),
        ('PlainViT(depth=1', ['unbalanced parentheses']),
        ('timm:', ['model name']),
        ('not a model', ['not a backbone class name']),
        ('configs/a.py(whole=1)', ['whole must be True or False']),
    ],
)
def test_bad_specs_are_rejected_naming_the_spec(text, words):
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    message = str(info.value)
    assert repr(text) in message
    for w in words:
        assert w in message


def test_duplicate_labels_are_an_error():
    with pytest.raises(SpecError, match='same label'):
        parse_specs(['a=PlainViT(depth=1)', 'a=PlainViT(depth=2)'])
    assert [s.label for s in parse_specs(['PlainViT(depth=1)', 'PlainViT(depth=2)'])] == [
        'PlainViT(depth=1)',
        'PlainViT(depth=2)',
    ]


def test_unknown_backbone_lists_the_registered_ones():
    with pytest.raises(SpecError, match="unknown backbone 'NoSuchViT'.*PlainViT"):
        bm.build_model(parse_spec('NoSuchViT(depth=1)'), (32, 32))
    with pytest.raises(SpecError, match='depth'):
        bm.build_model(parse_spec("x=PlainViT(arch='tiny', depth=0)"), (32, 32))


def test_a_config_model_outside_the_frameworks_is_one_error_naming_the_scopes(tmp_path):
    # the harness and the dry run check a config's framework with one function (mmrecvit.mm.registry.config_scope)
    part = tmp_path / 'model_only.py'
    part.write_text("model = dict(type='MaskRCNN', backbone=dict(type='ResNet', depth=18))\n")
    with pytest.raises(SpecError, match=r"default_scope=None, allowed: \['mmdet', 'mmseg', 'mmpretrain'\]"):
        bm.build_model(parse_spec(f'{part}(whole=True)'), (32, 32))


# The dry runs of an OpenMMLab recipe and of a detectron2 LazyConfig: imported for such a recipe only (by
# tools/analysis_tools/dry_run.py), never by the rest of the harness.
FRAMEWORK_DRY_RUNS = ('dry_run_mm.py', 'dry_run_d2.py')


@pytest.mark.parametrize(
    'module', sorted(p.name for p in Path(bm.__file__).parent.glob('*.py') if p.name not in FRAMEWORK_DRY_RUNS)
)
def test_library_does_not_import_a_framework_at_module_level(module):
    tree = ast.parse((Path(bm.__file__).parent / module).read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names]
    names += ['.' * n.level + (n.module or '') for n in top if isinstance(n, ast.ImportFrom)]
    ours = ('..mm', '..d2', '.dry_run_mm', '.dry_run_d2', 'mmrecvit.mm', 'mmrecvit.d2')
    assert not [n for n in names if n.split('.')[0] in ('mmdet', 'mmseg', 'timm', 'mmengine') or n.startswith(ours)]


# ---- depth forcing --------------------------------------------------------------------------------
EDGE_TINY = dict(arch='tiny', embed_dim=32, num_heads=2, img_size=64)  # L = 12
EDGE_SPEC = "EdgeRecViT(arch='tiny', embed_dim=32, num_heads=2, img_size=64"


def edge_forward(module, images):
    with torch.inference_mode():
        maps = module(images)
    return maps, maps.stats.token_maps['depth'].flatten(1)  # (B, Np)


@pytest.mark.parametrize('knobs', [{}, dict(depth_shift=-1, max_depth=10)])
def test_harness_forcing_overrides_the_depth_assignment_of_one_instance(knobs):
    """The pattern replaces the ranker's choice of this instance only; the model's own shift and cap
    still apply after it; outputs and FLOPs are those of the model run on that pattern."""
    images = torch.randn(3, 3, 128, 160)  # 8 x 10 = 80 patch tokens per image
    extra = ''.join(f', {k}={v!r}' for k, v in knobs.items())
    torch.manual_seed(0)
    bench = bm.build_model(parse_spec(f'{EDGE_SPEC}, forced_mean_depth=8.3, forced_depth_seed=1{extra})'), (128, 160))
    assert bench.module.depth_pattern is not None  # this instance's knob: nothing of the class is replaced
    maps, depth = edge_forward(bench.run, images)  # the harness's timed call (its FLOPs: `bench.flops()`)

    pattern = bm.forced_depths(3, 80, 8.3, 12, 1)
    if knobs:
        assert torch.equal(depth, (pattern - 1).clamp(1, 10))
    else:
        assert torch.equal(depth, pattern)
        assert depth.float().mean(1).tolist() == pytest.approx([8.3] * 3)  # 664 / 80 per image

    torch.manual_seed(0)
    same = EdgeRecViT(**EDGE_TINY, **knobs).eval()
    same.depth_pattern = lambda chosen: pattern  # then the model's own shift and cap, as the harness's
    same_maps, same_depth = edge_forward(same, images)
    assert torch.equal(depth, same_depth)
    assert all(torch.equal(a, b) for a, b in zip(maps, same_maps))
    assert bench.flops() == same_maps.stats.flops


@pytest.mark.parametrize(
    'args', [(4, 1024, 8.3, 12, 0), (2, 35, 3.5, 12, 1), (3, 16, 6.0, 5, 2), (1, 10, 12.0, 12, 0), (2, 7, 1.0, 12, 3)]
)
def test_forced_depths_have_the_asked_mean_per_image(args):
    batch, tokens, mean, levels, seed = args
    depth = bm.forced_depths(*args)
    assert depth.shape == (batch, tokens) and int(depth.min()) >= 1 and int(depth.max()) <= levels
    assert depth.sum(1).tolist() == [round(min(mean, levels) * tokens)] * batch  # a mean above L saturates
    assert torch.equal(depth, bm.forced_depths(*args))  # deterministic in the seed
    if 1 < mean < levels and batch > 1:
        assert not torch.equal(depth[0], depth[1])  # images get different patterns (as a real ranker gives)


def test_config_backbone_takes_the_forcing_kwargs(tmp_path):
    config = tmp_path / 'edge_tiny.py'
    config.write_text(f"model = dict(backbone=dict(type='mmdet.EdgeRecViT', **{EDGE_TINY!r}, forced_mean_depth=12))\n")
    bench = bm.build_model(parse_spec(f'{config}(forced_mean_depth=6.0, forced_depth_seed=2)'), (64, 64))
    _, depth = edge_forward(bench.module, torch.randn(2, 3, 64, 64))
    assert torch.equal(depth, bm.forced_depths(2, 16, 6.0, 12, 2))


@pytest.mark.parametrize(
    'text, words',
    [
        (f'{EDGE_SPEC}, forced_mean_depth=0.5)', ['forced_mean_depth', '[1.0, 12.0]']),
        (f'{EDGE_SPEC}, forced_mean_depth="8")', ['forced_mean_depth', 'number']),
        (f'{EDGE_SPEC}, forced_mean_depth=8.3, forced_depth_seed=-1)', ['forced_depth_seed', '[0, inf]']),
        (f'{EDGE_SPEC}, forced_depth_seed=1)', ['forced_depth_seed', 'give forced_mean_depth']),
        ("PlainViT(arch='tiny', depth=1, forced_mean_depth=6.0)", ['forced_mean_depth', 'PlainViT has none']),
    ],
)
def test_bad_forcing_is_a_spec_error(text, words):
    with pytest.raises(SpecError) as info:
        bm.build_model(parse_spec(text), (32, 32))
    message = str(info.value)
    assert repr(text) in message
    for w in words:
        assert w in message


# ---- scheduling and statistics --------------------------------------------------------------------
def test_interleaved_order_is_round_robin_with_rotation():
    order = bm.interleaved_order(3, 4)
    assert order == [0, 1, 2, 1, 2, 0, 2, 0, 1, 0, 1, 2]
    for r in range(4):
        assert sorted(order[3 * r : 3 * r + 3]) == [0, 1, 2]  # each repeat runs every model once
    assert bm.interleaved_order(2, 3, rotate=False) == [0, 1, 0, 1, 0, 1]
    assert bm.interleaved_order(2, 0) == []


@pytest.mark.parametrize('values', [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0, 9.0]])
def test_percentile_matches_numpy(values):
    for q in (0, 25, 50, 75, 100):
        assert bm.percentile(values, q) == pytest.approx(np.percentile(values, q))


def fake_rows():
    # batch 1: ref 100 ms / 10 GFLOPs; fast: 50 ms / 4 GFLOPs (ideal 2.5x, real 2x); matmul 200 GFLOP/s
    mm = dict(matmul_flops=200e9)
    return [
        Row('ref', 1, [0.09, 0.10, 0.11], 10e9, 400, 1000, **mm),
        Row('fast', 1, [0.05, 0.04, 0.06], 4e9, 100, 500, **mm),
        Row('nofl', 1, [0.20], None, None, 7, **mm),
        Row('ref', 8, [0.8], 10e9, 800, 1000, matmul_flops=100e9),
        Row('fast', 8, [0.2], 5e9, 200, 500, matmul_flops=100e9),
    ]


def test_ratios_and_quotient_arithmetic():
    rows = fake_rows()
    bm.add_ratios(rows, 'ref')
    ref1, fast1, nofl, ref8, fast8 = rows
    assert (ref1.latency_ratio, ref1.speedup, ref1.ideal_speedup, ref1.quotient, ref1.memory_ratio) == (1, 1, 1, 1, 1)
    assert fast1.latency_ratio == pytest.approx(0.5)
    assert fast1.speedup == pytest.approx(2.0)
    assert fast1.ideal_speedup == pytest.approx(2.5)
    assert fast1.quotient == pytest.approx(0.8)
    assert fast1.memory_ratio == pytest.approx(0.25)
    assert fast1.images_per_s == pytest.approx(20.0)
    assert fast1.achieved_flops == pytest.approx(4e9 / 0.05)
    assert fast1.peak_fraction == pytest.approx(0.4) and nofl.peak_fraction is None
    assert fast8.peak_fraction == pytest.approx(2.0)  # 8 x 5 GFLOP / 0.2 s over 100 GFLOP/s
    assert nofl.speedup == pytest.approx(0.5) and nofl.ideal_speedup is None and nofl.quotient is None
    assert nofl.memory_ratio is None
    # batch 8 is compared with the reference at batch 8
    assert fast8.speedup == pytest.approx(4.0) and fast8.ideal_speedup == pytest.approx(2.0)
    assert fast8.quotient == pytest.approx(2.0) and ref8.speedup == 1


def test_min_statistic_uses_the_fastest_repeat():
    rows = [
        Row('ref', 1, [0.10, 0.30, 0.50], 1e9, None, 1, matmul_flops=100e9, statistic='min'),
        Row('b', 1, [0.20, 0.21, 0.90], 1e9, None, 1, matmul_flops=100e9, statistic='min'),
    ]
    bm.add_ratios(rows, 'ref')
    assert rows[0].latency_s == 0.10 and rows[0].median_s == 0.30
    assert rows[1].latency_ratio == pytest.approx(2.0) and rows[1].images_per_s == pytest.approx(5.0)
    assert rows[0].peak_fraction == pytest.approx(0.1)
    result = fake_result()
    result.config.statistic = 'min'
    assert '| model | batch | latency ms (min) |' in bm.format_markdown(result)


# ---- analytic FLOPs -------------------------------------------------------------------------------
def plain_vit_hand_flops(D, depth, h, w, hidden, patch=16, channels=3, cls=1):
    N = h * w + cls
    per_block = 2 * (3 * D * D * N + 2 * N * N * D + D * D * N + 2 * D * hidden * N)
    return depth * per_block + 2 * channels * patch * patch * D * h * w


@pytest.mark.parametrize('hw, grid', [((64, 80), (4, 5)), ((70, 90), (5, 6))])  # padded to the patch size
def test_plain_vit_flops_equal_the_hand_formula(hw, grid):
    model = PlainViT(arch='tiny', depth=3, embed_dim=32, num_heads=2, img_size=64).eval()
    with torch.inference_mode():
        out = model(torch.randn(2, 3, *hw))
    assert bm.backbone_flops(out) == pytest.approx(plain_vit_hand_flops(32, 3, *grid, hidden=128), rel=1e-12)
    # only the applications that ran are counted: out_indices=(0,) stops after block 0
    model = PlainViT(arch='tiny', depth=3, embed_dim=32, num_heads=2, out_indices=(0,)).eval()
    with torch.inference_mode():
        out = model(torch.randn(1, 3, *hw))
    assert bm.backbone_flops(out) == pytest.approx(plain_vit_hand_flops(32, 1, *grid, hidden=128), rel=1e-12)


def test_timm_vit_gets_the_same_count_as_our_plain_vit():
    timm_model = bm.build_timm(parse_spec('timm:vit_tiny_patch16_224(depth=2)'), (48, 64))
    assert timm_model.flops() == pytest.approx(plain_vit_hand_flops(192, 2, 3, 4, hidden=768), rel=1e-12)
    assert 'forward_intermediates' in timm_model.timed
    with torch.inference_mode():
        maps = timm_model.run(torch.randn(1, 3, 48, 64))
    assert all(m.shape == (1, 192, 3, 4) for m in maps)


def test_modules_without_statistics_have_no_count():
    assert bm.backbone_flops(torch.nn.Linear(2, 2)(torch.randn(1, 2))) is None


# ---- reports --------------------------------------------------------------------------------------
def fake_result():
    rows = fake_rows()
    bm.add_ratios(rows, 'ref')
    env = dict(date='2026-01-01T00:00:00+00:00', threads='2', device='cpu (test)')
    return BenchResult(
        env=env,
        models=[('ref', 'forward', 1000), ('fast', 'forward', 500), ('nofl', 'x', 7)],
        rows=rows,
        reference='ref',
        peak_flops=200e9,
        config=BenchConfig(batches=(1, 8)),
        command='python tools/analysis_tools/benchmark.py ref=... fast=...',
    )


def test_markdown_report():
    text = bm.format_markdown(fake_result())
    lines = text.splitlines()
    assert 'python tools/analysis_tools/benchmark.py ref=... fast=...' in lines
    assert '- threads: 2' in lines
    assert any(
        line.startswith(
            '- matmul (fp32 2048³ `torch.mm`): best 200.0 GFLOP/s; median during the timing '
            'of batch 1: 200.0, batch 8: 100.0'
        )
        for line in lines
    )
    table = [line for line in lines if line.startswith('|')]
    assert len(table) == 2 + 5 and len({line.count('|') for line in table}) == 1
    head = [c.strip() for c in table[0].strip('|').split('|')]
    fast = dict(zip(head, [c.strip() for c in table[3].strip('|').split('|')]))
    assert fast['model'] == 'fast' and fast['batch'] == '1'
    assert fast['latency ms (median)'] == '50.00' and fast['images/s'] == '20.0'
    assert fast['GFLOPs/img'] == '4.00' and fast['% of matmul'] == '40.0'  # 80 GFLOP/s of 200
    assert (fast['speed-up'], fast['ideal speed-up (FLOP ratio)'], fast['quotient']) == ('2.000', '2.500', '0.800')
    nofl = dict(zip(head, [c.strip() for c in table[4].strip('|').split('|')]))
    assert nofl['GFLOPs/img'] == nofl['quotient'] == nofl['peak mem MiB'] == '–'


def test_csv_report(tmp_path):
    path = tmp_path / 'sub' / 'bench.csv'
    bm.write_csv(fake_result(), path)
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert [r['label'] for r in rows] == ['ref', 'fast', 'nofl', 'ref', 'fast']
    assert list(rows[0]) == bm.CSV_FIELDS
    fast = rows[1]
    assert float(fast['latency_ms_median']) == pytest.approx(50.0)
    assert float(fast['latency_ms_min']) == pytest.approx(40.0) and fast['n'] == '3'
    assert float(fast['quotient']) == pytest.approx(0.8) and float(fast['peak_fraction']) == pytest.approx(0.4)
    assert rows[2]['quotient'] == '' and rows[2]['gflops_per_image'] == ''


# ---- the environment -------------------------------------------------------------------------------
def test_the_report_names_the_callers_checkout_not_one_guessed_from_the_package(tmp_path, monkeypatch):
    """mmrecvit is named by the commit of the checkout the caller passes (the tool passes its own), or
    without one by the package version: the package does not assume it lives in a repository."""
    import mmrecvit
    from mmrecvit.benchmark.machine import mmrecvit_version

    monkeypatch.setenv('GIT_CEILING_DIRECTORIES', str(tmp_path.parent))  # tmp_path: in no git checkout
    assert bm.environment('cpu', 1)['software'].endswith(f'mmrecvit {mmrecvit.__version__}')
    assert mmrecvit_version(tmp_path) == 'unknown'
    git = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT, capture_output=True, text=True)
    commit = git.stdout.strip() if git.returncode == 0 else 'unknown'
    assert bm.environment('cpu', 1, checkout=ROOT)['software'].endswith(f'mmrecvit {commit}')
    assert load_tool().REPO == ROOT


# ---- end to end -----------------------------------------------------------------------------------
def test_cli_end_to_end_on_tiny_models(tmp_path, capsys):
    tool = load_tool()
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # not the --threads below, so that "restored" can fail whatever the worker runs with
    out, table = tmp_path / 'b.md', tmp_path / 'b.csv'
    argv = [
        "ours=PlainViT(arch='tiny', depth=1)",
        'rec=NaiveRecursiveViT(arch="tiny", depth=2, num_blocks=1)',
        'timm:vit_tiny_patch16_224(depth=1)',
        '--batch',
        '1',
        '2',
        '--size',
        '32',
        '48',
        '--warmup',
        '1',
        '--repeats',
        '1',
        '--threads',
        '1',
        '--peak-size',
        '64',
        '--no-progress',
        '--out',
        str(out),
        '--csv',
        str(table),
    ]
    try:
        assert tool.main(argv) == 0
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out
    assert printed == out.read_text()
    assert 'ours=PlainViT(arch=' in printed and '- threads: 1' in printed
    with table.open() as f:
        rows = list(csv.DictReader(f))
    assert [(r['label'], r['batch']) for r in rows] == [
        ('ours', '1'),
        ('rec', '1'),
        ('timm:vit_tiny_patch16_224(depth=1)', '1'),
        ('ours', '2'),
        ('rec', '2'),
        ('timm:vit_tiny_patch16_224(depth=1)', '2'),
    ]
    for r in rows:
        assert r['n'] == '1' and float(r['latency_ms_median']) > 0 and float(r['peak_mem_mib']) > 0
        assert (r['height'], r['width'], r['threads']) == ('32', '48', '1')
        assert float(r['peak_fraction']) > 0 and float(r['matmul_median_gflops_per_s']) > 0
    ours, rec, timm_row = rows[:3]
    assert float(ours['quotient']) == 1.0
    one, two = (plain_vit_hand_flops(192, d, 2, 3, hidden=768) for d in (1, 2))
    assert float(rec['ideal_speedup']) == pytest.approx(one / two)  # two applications vs one
    assert float(timm_row['ideal_speedup']) == pytest.approx(1.0)  # same analytic count as ours
    assert float(ours['gflops_per_image']) * 1e9 == pytest.approx(plain_vit_hand_flops(192, 1, 2, 3, hidden=768))


def test_cli_errors_name_the_problem(capsys):
    tool = load_tool()
    with pytest.raises(SystemExit):
        tool.main(['PlainViT(depth=x)', '--no-progress'])
    assert "'PlainViT(depth=x)'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tool.main(['a=PlainViT(depth=1)', '--reference', 'b', '--no-progress'])
    assert "--reference 'b'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tool.main(['PlainViT(depth=1)', '--size', '1', '2', '3'])
    with pytest.raises(SystemExit):
        tool.main(['PlainViT(depth=1)', '--repeats', '0', '--no-memory'])


def test_memory_only_run_has_no_latency(tmp_path, capsys):
    tool = load_tool()
    assert (
        tool.main(
            [
                "PlainViT(arch='tiny', depth=1)",
                '--size',
                '32',
                '--repeats',
                '0',
                '--warmup',
                '0',
                '--threads',
                '1',
                '--peak-size',
                '64',
                '--no-progress',
                '--csv',
                str(tmp_path / 'm.csv'),
            ]
        )
        == 0
    )
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith('| PlainViT')][0]
    cells = [c.strip() for c in row.strip('|').split('|')]
    assert cells[2] == '–' and cells[6] != '–'  # no latency, but FLOPs
    with (tmp_path / 'm.csv').open() as f:
        (r,) = list(csv.DictReader(f))
    assert r['latency_ms_median'] == '' and r['n'] == '0' and float(r['peak_mem_mib']) > 0


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec('mmseg') is None, reason='needs mmseg')
def test_config_backbone_and_whole_segmentor(capsys):
    config = ROOT / 'configs' / 'seg' / 'upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py'
    if not config.is_file():
        pytest.skip(f'{config} not written yet')
    tool = load_tool()
    small = 'depth=4, out_indices=(0, 1, 2, 3)'
    assert (
        tool.main(
            [
                f'bb={config}({small})',
                f'whole={config}(whole=True, {small})',
                '--size',
                '64',
                '--warmup',
                '0',
                '--repeats',
                '1',
                '--threads',
                '1',
                '--peak-size',
                '64',
                '--no-progress',
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    rows = {
        line.split('|')[1].strip(): line
        for line in out.splitlines()
        if line.startswith('| bb') or line.startswith('| whole')
    }
    assert set(rows) == {'bb', 'whole'}
    assert "EncoderDecoder(inputs, data_samples, mode='tensor')" in out
    assert not math.isnan(float(rows['whole'].split('|')[3]))


def test_train_mode_times_a_training_step():
    """mode='train': train mode, forward + backward + an optimizer step (the weights move), peak memory of it."""
    bench = bm.build_model(
        parse_spec("EdgeRecViT(arch='tiny', embed_dim=32, num_heads=2, depth=4, img_size=64)"), (64, 64)
    )
    before = {k: v.clone() for k, v in bench.module.state_dict().items()}
    result = bm.run_benchmark(
        [bench], BenchConfig(batches=(2,), hw=(64, 64), warmup=1, repeats=2, mode='train', progress=False)
    )
    assert bench.module.training
    assert any(not torch.equal(before[k], v) for k, v in bench.module.state_dict().items())
    (row,) = result.rows
    assert len(row.samples_s) == 2 and row.peak_bytes > 0 and row.flops_per_image > 0
    assert 'training step' in result.env['timed']
    with pytest.raises(ValueError, match='mode must be one of'):
        bm.run_benchmark([bench], BenchConfig(mode='backward'))
