"""Smoke and consistency tests of the issue-8 tools on the toy data and tiny models (CI, fast).

Every registered backbone (tests/backbone_cases.py) goes through get_flops, visualize_depth and
timm2mmrecvit with no tool change: a tiny UperNet config is written per backbone.
"""

import csv
import importlib.util
import json
import os
import os.path as osp
import sys
import tempfile

import matplotlib.image as mpimg
import numpy as np
import pytest
import torch
import yaml
from backbone_cases import BACKBONE_CASES
from helpers import REPO, bad_input_line, cached_config

sys.path.insert(0, osp.join(REPO, 'tools', 'analysis_tools'))
sys.path.insert(0, osp.join(REPO, 'tools', 'model_converters'))
sys.path.insert(0, osp.join(REPO, 'tools', 'misc'))
import compile_graphs  # noqa: E402  (tools/analysis_tools/compile_graphs.py)
import gen_metafile  # noqa: E402  (tools/misc/gen_metafile.py)
import get_flops  # noqa: E402  (tools/analysis_tools/get_flops.py)
import padding_effect  # noqa: E402  (tools/analysis_tools/padding_effect.py)
import visualize_depth  # noqa: E402  (tools/analysis_tools/visualize_depth.py)

from mmrecvit.benchmark.gpu_check_results import Result  # noqa: E402
from mmrecvit.mm.complexity import flop_analyzer  # noqa: E402
from mmrecvit.mm.tooling import build_model, load_config, prepare_inputs  # noqa: E402
from mmrecvit.models import BACKBONES  # noqa: E402
from mmrecvit.models.flops import BlockWork  # noqa: E402

SEG_TOY = osp.join(REPO, 'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py')

DET_TOY = osp.join(REPO, 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py')

SHAPE = ['--shape', '64', '80']

pytestmark = pytest.mark.usefixtures('one_thread')


@pytest.fixture(scope='module')
def tiny_configs(tmp_path_factory):
    """A tiny UperNet config (D=32 backbone and heads) per registered backbone."""
    root = tmp_path_factory.mktemp('cfgs')
    paths = {}
    for name, kwargs in BACKBONE_CASES.items():
        paths[name] = root / f'upernet_{name.lower()}_tiny.py'
        paths[name].write_text(
            f"_base_ = '{SEG_TOY}'\n"
            f"model = dict(backbone=dict(_delete_=True, type='{name}', **{kwargs!r}), neck=dict(in_channels=32),\n"
            '             decode_head=dict(in_channels=[8, 16, 32, 32], channels=32),\n'
            '             auxiliary_head=dict(in_channels=32, channels=32))\n'
        )
    return paths


@pytest.fixture(scope='module')
def seg_image(toy_root):
    return str(toy_root / 'toy_ade/ADEChallengeData2016/images/validation/ADE_val_00000001.jpg')


@pytest.fixture(scope='module')
def det_image(toy_root):
    return str(toy_root / 'toy_coco/val2017/000001000001.jpg')


# ---- get_flops ----------------------------------------------------------------------------------
@pytest.mark.parametrize('name', sorted(BACKBONE_CASES))
def test_get_flops_counts_every_backbone(name, tiny_configs, seg_image, capsys):
    report = get_flops.main([str(tiny_configs[name]), *SHAPE, '--per-step', '--image', seg_image])
    out = capsys.readouterr().out
    assert 'GFLOPs (work done)' in out and 'Work of the backbone' in out and '2 x multiply-accumulates' in out
    assert report.input_shape == (1, 3, 64, 80)
    bb = report.backbone
    blocks = [w for w in bb.work if isinstance(w, BlockWork)]
    assert bb.name == name and bb.grid == (4, 5) and blocks
    assert 0 < bb.flops <= bb.dense_flops * (1 + 1e-9)
    assert report.flops == pytest.approx(report.rest_flops + bb.flops) and report.rest_flops > 0
    if all(s.queries == bb.tokens and s.new_kv == 0 for s in blocks):  # dense forward: nothing saved
        assert bb.flops == pytest.approx(bb.dense_flops)
    if bb.traced is not None:  # mmengine's own trace of the backbone counts the same work
        assert bb.traced == pytest.approx(bb.flops, rel=1e-9)


def test_get_flops_det_default_pipeline_matches_a_plain_mmengine_trace(det_image, capsys):
    """The whole-model count (neck/heads traced with the backbone replayed, backbone from statistics)
    equals mmengine tracing the whole model in one piece, for a dense backbone."""
    options = ['--cfg-options', 'model.test_cfg.rpn.max_per_img=20', 'model.test_cfg.rpn.nms_pre=100']
    report = get_flops.main([DET_TOY, '--image', det_image, *options])
    assert '-> the test pipeline -> 256x256' in capsys.readouterr().out
    cfg = load_config(DET_TOY, {'model.test_cfg.rpn.max_per_img': 20, 'model.test_cfg.rpn.nms_pre': 100})
    model, _ = build_model(cfg)
    data = prepare_inputs(model, cfg, det_image)
    model.forward = lambda x: type(model).forward(model, x, data['data_samples'], mode='tensor')
    with torch.no_grad():
        whole = 2 * flop_analyzer(model, (data['inputs'],)).total()
    assert report.flops == pytest.approx(whole, rel=1e-6)


# ---- visualize_depth ----------------------------------------------------------------------------
@pytest.mark.parametrize('name', sorted(BACKBONE_CASES))
def test_visualize_depth_draws_every_statistic(name, tiny_configs, seg_image, tmp_path):
    written = visualize_depth.main([str(tiny_configs[name]), 'none', seg_image, '--out-dir', str(tmp_path), *SHAPE])
    cfg = load_config(tiny_configs[name])
    model, _ = build_model(cfg)
    data = prepare_inputs(model, cfg, seg_image, (64, 80))
    with torch.no_grad():
        stats = model.backbone(data['inputs']).stats
    expected = {f'ADE_val_00000001_{visualize_depth.safe_name(k)}.png' for k in stats.token_maps}
    expected |= {f'ADE_val_00000001_table_{visualize_depth.safe_name(k)}.png' for k in stats.tables}
    assert {p.name for p in written} == expected
    for path in written:
        img = mpimg.imread(path)
        assert img.ndim == 3 and img.shape[0] > 200 and len(np.unique(img)) > 10  # a drawn figure


def test_visualize_depth_uses_the_checkpoint(tiny_configs, seg_image, tmp_path):
    """A whole-model checkpoint (as tools/train.py saves it) is loaded: a zero ranker gives depth 1."""
    cfg = load_config(tiny_configs['EdgeRecViT'])
    model, _ = build_model(cfg)
    with torch.no_grad():
        model.backbone.ranker.fc2.weight.zero_()  # all logits equal -> argmax depth 1
    ckpt = tmp_path / 'iter_1.pth'
    torch.save({'meta': {'iter': 1}, 'state_dict': model.state_dict()}, ckpt)
    loaded, weights = build_model(cfg, str(ckpt))
    assert weights.startswith('whole model')
    written = visualize_depth.visualize(loaded, cfg, [seg_image], tmp_path / 'vis', weights, (64, 80))
    assert {p.name for p in written} == {'ADE_val_00000001_depth.png', 'ADE_val_00000001_confidence.png'}
    with torch.no_grad():
        stats = loaded.backbone(prepare_inputs(loaded, cfg, seg_image, (64, 80))['inputs']).stats
    assert (stats.token_maps['depth'] == 1).all()


def test_visualize_depth_colour_bars_are_as_tall_as_their_image(tmp_path, monkeypatch):
    """Issue 41.7: `fig.colorbar(ax=...)` spanned the axes' box, taller than a wide image's panel."""
    figures = []
    monkeypatch.setattr(visualize_depth.plt, 'close', figures.append)  # keep the figure to measure it
    image = np.zeros((64, 160, 3), np.uint8)  # a wide image: 4 x 10 patches
    depths = np.arange(40).reshape(4, 10) % 3 + 1
    visualize_depth.draw_token_map(image, depths, 16, 'title', 'depth', tmp_path / 'd.png')
    visualize_depth.draw_token_map(image, np.random.rand(3, 4, 10), 16, 'title', 'mixture', tmp_path / 'm.png')
    for fig in figures:
        fig.canvas.draw()
        bars = [ax for ax in fig.axes if getattr(ax, '_colorbar', None) is not None]  # matplotlib marks its bars so
        panels = [ax for ax in fig.axes if ax.images and ax not in bars][1:]  # not the input image
        assert len(bars) == len(panels) > 0
        for bar, panel in zip(bars, panels):
            assert abs(bar.get_position().height - panel.get_position().height) < 1e-3


# ---- gen_metafile -------------------------------------------------------------------------------
def test_gen_metafile_writes_a_valid_model_index(tiny_configs, tmp_path, capsys):
    out = tmp_path / 'metafile.yml'
    configs = [str(tiny_configs['PlainViT']), str(tiny_configs['EdgeRecViT'])]
    (tmp_path / 'demo' / 'seg_plain').mkdir(parents=True)  # a saved demo score for the PlainViT config only
    (tmp_path / 'demo' / 'seg_plain' / 'scores.json').write_text(
        json.dumps(
            {'config': configs[0], 'iters': 150, 'trained': {'mIoU': 31.25, 'aAcc': 80.0}, 'untrained': {'mIoU': 0.1}}
        )
    )
    entries = gen_metafile.main(
        ['--configs', *configs, '--out', str(out), '--scores', str(tmp_path / 'demo'), '--latency-repeats', '2']
    )
    printed = capsys.readouterr().out
    assert "Papers' numbers" in printed and 'Measured here' in printed
    text = out.read_text()
    assert text.startswith('# Model index of mmrecvit. GENERATED') and '# toy-demo scores' in text
    doc = yaml.safe_load(text)
    assert [c['Name'] for c in doc['Collections']] == ['PlainViT', 'EdgeRecViT']
    assert doc['Models'] == entries
    for model in doc['Models']:
        md = model['Metadata']
        assert md['Test Size'] == '256x256'
        assert 0 < md['Backbone FLOPs (G, 224x224)'] <= md['Backbone FLOPs dense (G, 224x224)']
        assert md['FLOPs (G, test size)'] > md['FLOPs (G, 224x224)'] > 0
        assert model['Results'][0]['Dataset'] == 'ADE20K (embedded toy set)'
    plain, edge = doc['Models']
    assert plain['Results'][0]['Metrics'] == {'mIoU': 31.25} and edge['Results'][0]['Metrics'] == {'mIoU': None}
    assert plain['Metadata'][gen_metafile.LATENCY_KEY] == 1.0 and edge['Metadata'][gen_metafile.LATENCY_KEY] > 0
    assert plain['Metadata']['Toy Training Iterations'] == 150 and edge['Metadata']['Toy Training Iterations'] is None
    assert '| mIoU 31.2 (150 it.) |' in printed or '| mIoU 31.3 (150 it.) |' in printed


def test_gen_metafile_refuses_a_scores_folder_without_scores(tiny_configs, tmp_path, capsys):
    line = bad_input_line(
        capsys,
        lambda: gen_metafile.main(
            ['--configs', str(tiny_configs['PlainViT']), '--out', str(tmp_path / 'm.yml'), '--scores', str(tmp_path)]
        ),
    )
    assert line.endswith(f'--scores {tmp_path}: no */scores.json there (tools/demo.py writes them)')


def test_every_config_is_indexed_with_a_known_collection():
    """Each config's backbone (the registered class its text names) has a collection with a paper."""
    configs = gen_metafile.discover(gen_metafile.REPO)
    assert configs and not any('_base_' in c.parts for c in configs)
    for config in configs:  # the backbone type after inheritance (a config may only change a base's arguments)
        backbone = cached_config(config).model.backbone.type
        assert backbone in BACKBONES, f'{config.name}: backbone {backbone!r} is not ours'
        assert backbone in gen_metafile.COLLECTIONS, f'{config.name}: add {backbone} to COLLECTIONS'


def test_gen_metafile_refuses_negative_latency_repeats(tiny_configs, tmp_path, capsys):
    with pytest.raises(SystemExit):
        gen_metafile.main(
            ['--configs', str(tiny_configs['PlainViT']), '--out', str(tmp_path / 'm.yml'), '--latency-repeats', '-1']
        )
    assert '--latency-repeats must be >= 0' in capsys.readouterr().err


def test_padding_effect_compares_an_image_alone_and_padded(toy_root):
    cfg = osp.join(REPO, 'configs/det/mask-rcnn_morvit-ti_fpn_1xb2-800it_toy-coco.py')
    r = padding_effect.main([cfg, 'none', '--num-images', '1', '--data-root', str(toy_root / 'toy_coco')])
    assert {'alone', 'padded_real', 'padding', 'changed'} <= set(r)
    assert 1 <= r['alone'] <= 5 and 1 <= r['padded_real'] <= 5 and 0 <= r['changed'] <= 1  # 1 + N_r=4 at most
    with pytest.raises(SystemExit, match='must be one of'):
        padding_effect.main([SEG_TOY, 'none'])


def test_padding_effect_of_edge_recvit_reports_depths_and_the_balance_loss_both_ways(toy_root):
    cfg = osp.join(REPO, 'configs/det/mask-rcnn_edgerecvit-ti_fpn_1xb2-800it_toy-coco.py')
    r = padding_effect.main([cfg, 'none', '--num-images', '1', '--data-root', str(toy_root / 'toy_coco')])
    assert all(1 <= r[k] <= 6 for k in ('alone', 'padded_real', 'padding'))  # the toy Edge-RecViT: 6 steps
    assert r['loss_du/alone'] != r['loss_du/padded']  # DU averages the padding tokens in


TOOL = 'tools/analysis_tools/compute_curve.py'


# ---- the curve tool ------------------------------------------------------------------------------
def test_compute_curve_runs_end_to_end_on_a_toy_config(tmp_path, toy_root):
    from mmrecvit.datasets import toy_data_cfg

    config = os.path.join(REPO, 'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py')
    options = [f'{k}={v}' for k, v in toy_data_cfg('seg', toy_root).items()]
    options += [
        'test_dataloader.num_workers=0',
        'test_dataloader.persistent_workers=False',
        'test_dataloader.dataset.indices=1',
        'model.backbone.depth=4',
    ]
    out = tmp_path / 'curve'
    spec = importlib.util.spec_from_file_location('compute_curve', os.path.join(REPO, TOOL))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool.main(
        [
            config,
            'none',
            '--compute',
            '0.5',
            '1.0',
            '--out-dir',
            str(out),
            '--work-dir',
            str(tmp_path / 'work'),
            '--latency-runs',
            '1',
            '--flops-images',
            '1',
            '--cfg-options',
            *options,
        ]
    )
    rows = list(csv.DictReader(open(out / 'compute_curve.csv')))
    assert [float(r['compute']) for r in rows] == [0.5, 1.0]
    assert float(rows[0]['backbone_gflops']) < float(rows[1]['backbone_gflops'])
    assert all(r['metric'] == 'mIoU' and r['value'] != '' for r in rows)
    assert (out / 'compute_curve.png').stat().st_size > 0


def test_compile_graphs_tables_each_mode_of_the_chosen_cases_and_removes_its_scratch_folder(
    tmp_path, monkeypatch, capsys
):
    """The table and the scratch folder; the measure itself (`compiled_case`) is gpu_check's, tested there."""
    calls = []

    def case(case, setup, mode):
        calls.append((case.name, mode, setup.work.is_dir()))
        return Result('compile', case.name, '1 graph', '1', True)

    monkeypatch.setattr(compile_graphs, 'compiled_case', case)
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    table = compile_graphs.main(['--cases', 'MoRViT', 'PlainViT'])
    modes = [('train', True), ('eval', True)]
    assert calls == [('PlainViT', *m) for m in modes] + [('MoRViT', *m) for m in modes]  # CASES' order
    assert table.splitlines()[-1] == '| MoRViT | eval | 1 graph | 1 | True |'
    assert list(tmp_path.iterdir()) == []  # the scratch folder went with the run
    with pytest.raises(SystemExit):
        compile_graphs.main(['--cases', 'PlainVit'])
    assert "--cases ['PlainVit']: allowed ['PlainViT'," in capsys.readouterr().err
