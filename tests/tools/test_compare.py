"""tools/analysis_tools/compare.py (issue 37.4): one table of what makes a comparison fair, every column where the
recipes differ marked, and `--check` failing on a difference that no recipe declares."""

import os.path as osp
import sys

import pytest
from helpers import REPO
from mmengine.config import Config

sys.path.insert(0, osp.join(REPO, 'tools', 'analysis_tools'))
import compare  # noqa: E402  (tools/analysis_tools/compare.py)

pytestmark = pytest.mark.usefixtures('one_thread')
TOY = osp.join(REPO, 'configs', 'det', 'mask-rcnn_{}-ti_fpn_1xb2-800it_toy-coco.py')
METHODS = ('plainvit', 'naiverecvit', 'srvit', 'revit', 'edgerecvit', 'morvit')
VITDET = [osp.join(REPO, 'configs', 'det', f'mask-rcnn_{m}-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py') for m in METHODS]

ADE20K = {  # the two ADE20K families of docs/comparison.md
    family: [osp.join(REPO, 'configs', 'seg', f'upernet_{m}-s_{family}.py') for m in METHODS]
    for family in ('8xb2-160k_ade20k-512x512', '8xb2-amp-ld0.95-160k_ade20k-512x512')
}


def variant(tmp_path, name, *lines, base=None):
    """A config file inheriting `base` (default the PlainViT toy) with `lines` added."""
    base = base or TOY.format('plainvit')
    path = tmp_path / name
    path.write_text('\n'.join([f'_base_ = {base!r}', *lines]) + '\n')
    return str(path)


def test_a_changed_value_is_a_marked_column_that_check_refuses_until_declared(tmp_path):
    plain = TOY.format('plainvit')
    changed = variant(tmp_path, 'dp.py', 'model = dict(backbone=dict(drop_path_rate=0.2))')
    declared = variant(
        tmp_path,
        'dp_declared.py',
        'model = dict(backbone=dict(drop_path_rate=0.2))',
        "recipe = dict(differs={'drop_path': 'why'})",
    )
    same = variant(tmp_path, 'same.py')
    assert compare.main([plain, same, '--check']) == 0
    rows = [compare.row_of(p) for p in (plain, changed)]
    differing, undeclared, _ = compare.compare(rows)
    assert differing == {'drop_path'} and undeclared == [('dp', 'drop_path', '0.2')]
    table = compare.render(rows)
    assert 'drop path ≠' in table and 'layer decay ≠' not in table
    assert '**0.2**' in table and 'NOT DECLARED' in table
    assert compare.main([plain, changed, '--check']) == 1
    assert compare.main([plain, changed]) == 0  # without --check: the table only
    assert compare.main([plain, declared, '--check']) == 0


def test_the_columns_read_the_built_model(tmp_path):
    plain, srvit = compare.row_of(TOY.format('plainvit')), compare.row_of(TOY.format('srvit'))
    assert plain['cells']['global_steps'] == 'all 6' and srvit['cells']['global_steps'] == 'all 24'
    assert float(srvit['cells']['gflops']) > 3.9 * float(plain['cells']['gflops'])  # 24 applications for 6 layers
    windowed = compare.row_of(variant(tmp_path, 'win.py', 'model = dict(backbone=dict(window_size=4))'))
    assert windowed['cells']['layout'] == '4x4 windows' and windowed['cells']['global_steps'].startswith('4 of 6')
    assert plain['cells']['start'] == 'random init' and plain['cells']['schedule'] == '800 iterations'


def test_bad_input_is_one_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        compare.main([TOY.format('plainvit')])
    assert 'two recipes or more' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        compare.main([TOY.format('plainvit'), str(tmp_path / 'nope.py')])
    assert 'no such config' in capsys.readouterr().err


@pytest.mark.slow
def test_the_vitdet_s_family_declares_every_difference_and_a_changed_layer_decay_is_caught(tmp_path):
    """The six ViTDet-S recipes (the table in docs/comparison.md): every difference declared; the same recipes with
    one value changed in one of them fail."""
    rows = [compare.row_of(p, images=2) for p in VITDET]
    differing, undeclared, declared = compare.compare(rows)
    assert not undeclared and {'params', 'start', 'global_steps'} <= differing
    assert {'layer_decay', 'drop_path', 'schedule', 'batch', 'layout'}.isdisjoint(differing)
    cells = {r['method']: r['cells'] for r in rows}
    # SR-ViT's global steps are its plan's at the test grid (docs/methods/srvit.md): at least one in each recursion of
    # each unit, of the 4 x 12 block applications it runs
    srvit = compare.build_backbone(Config.fromfile(VITDET[2]).model.backbone.to_dict())
    run, of = cells['SRViT']['global_steps'].split(' (')[0].split(' of ')
    assert int(of) == sum(srvit.eval_recursions[u] * len(b) for u, b in enumerate(srvit.unit_blocks))
    assert int(run) >= sum(srvit.eval_recursions) > len(srvit.unit_blocks)
    assert cells['ReViT']['start'].startswith('own IN-1k') and cells['PlainViT']['start'] == 'DeiT-S'
    changed = variant(
        tmp_path, 'ld.py', 'optim_wrapper = dict(paramwise_cfg=dict(layer_decay_rate=0.8))', base=VITDET[3]
    )
    assert compare.main([*VITDET[:3], changed, *VITDET[4:], '--check']) == 1


@pytest.mark.parametrize('family', sorted(ADE20K))
def test_each_ade20k_family_declares_every_difference(family):
    """The six UperNet recipes of each ADE20K family (docs/comparison.md): `--check` passes, and what differs is what
    the methods are (parameters, start), not the recipe (layer decay, drop path, schedule, batch)."""
    differing, undeclared, _ = compare.compare([compare.row_of(p, images=2) for p in ADE20K[family]])
    assert not undeclared and {'params', 'start'} <= differing  # `--check` exits 1 on any undeclared cell
    assert {'layer_decay', 'drop_path', 'schedule', 'batch'}.isdisjoint(differing)


@pytest.mark.parametrize(
    'recipe, size',
    [
        ('configs/det/mask-rcnn_plainvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', (1024, 1024)),  # the LSJ pad
        ('configs/det/mask-rcnn_plainvit-s_fpn_1x_coco.py', (800, 800)),  # keep_ratio (1333, 800): the short side
        ('configs/seg/upernet_plainvit-s_8xb2-160k_ade20k-512x512.py', (512, 512)),  # keep_ratio (2048, 512)
        ('configs/seg/upernet_plainvit-s_8xb2-amp-ld0.95-160k_ade20k-512x512.py', (512, 512)),  # the sliding crop
    ],
)
def test_the_test_size_is_one_square_test_image_as_the_pipeline_makes_it(recipe, size):
    assert compare.test_size(Config.fromfile(osp.join(REPO, recipe))) == size
