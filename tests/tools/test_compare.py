"""tools/analysis_tools/compare.py (issues 37.4, 45): a card of recipes whose every difference from the reference, found
in the whole resolved config and the built backbone, is declared with its value; a changed value fails `--check`.

The toy family (PlainViT, SR-ViT, Edge-RecViT toy detectors) is measured once per module; its declarations are
written from those rows (a recipe that declares what it is, its measured values in a table of the family), then one
value at a time is changed in a config."""

import os.path as osp
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import REPO
from mmengine.config import Config

from mmrecvit.mm import card, card_check, card_start
from mmrecvit.mm.start_meta import update_start_meta

sys.path.insert(0, osp.join(REPO, 'tools', 'analysis_tools'))
import compare  # noqa: E402  (tools/analysis_tools/compare.py)

pytestmark = pytest.mark.usefixtures('one_thread')
REPO_PATH = Path(REPO)
TOY = osp.join(REPO, 'configs', 'det', 'mask-rcnn_{}-ti_fpn_1xb2-800it_toy-coco.py')


def write(tmp_path, name, *lines, base):
    path = tmp_path / name
    path.write_text('\n'.join([f'_base_ = {base!r}', *lines]) + '\n')
    return str(path)


def declared(row, ref):
    """(the `recipe` line that declares every difference of `row` from `ref`, its measured values)."""
    differs, measured = {}, {}
    for f in card_check.check([ref, row]):
        if f.kind == 'NOT DECLARED':
            if f.key in card.MEASURED:
                differs[f.key], measured[f.key] = 'why', f.value
            else:
                differs[f.key] = (f.value, 'why')
    return f'recipe = dict(_delete_=True, differs={differs!r})', measured


# the recipes the tests derive from the family's SR-ViT: their measured values are its own
VARIANTS = ('variant', 'right', 'wrong', 'stale', 'paper', 'toy', 'started')


@pytest.fixture(scope='module')
def family(tmp_path_factory):
    """(paths, rows, table): the toy PlainViT (reference), SR-ViT and Edge-RecViT detectors, each declaring its
    differences, and the measured table of the family (SR-ViT's values also under the names of `VARIANTS`)."""
    tmp = tmp_path_factory.mktemp('family')
    ref = card.recipe_row(TOY.format('plainvit'), REPO)
    paths, rows, measured = [TOY.format('plainvit')], [ref], {}
    for method in ('srvit', 'edgerecvit'):
        row = card.recipe_row(TOY.format(method), REPO)
        line, measured[method] = declared(row, ref)
        paths.append(write(tmp, f'{method}.py', line, base=TOY.format(method)))
    measured.update({name: measured['srvit'] for name in VARIANTS})
    table = tmp / 'measured.yml'
    table.write_text('\n'.join(card.table_line(name, values) for name, values in measured.items()) + '\n')
    rows += [card.recipe_row(path, REPO, measured=measured) for path in paths[1:]]
    return paths, rows, str(table)


def test_a_family_declared_with_its_values_passes(family, capsys):
    paths, rows, table = family
    findings = card_check.check(rows)
    assert {f.kind for f in findings} == {'declared'}
    keys = {f.key for f in findings if f.recipe.startswith('srvit')}
    # what differs, found without a list of columns: the config's keys and the built backbone's facts
    assert {'model.backbone.type', 'model.backbone.num_recursions', 'feature_layers', 'gflops', 'params'} <= keys
    assert 'final_norm' in {f.key for f in findings if f.recipe.startswith('edgerecvit')}
    assert compare.main([*paths, '--check', '--measured', table]) == 0
    out = capsys.readouterr().out
    assert '| feature layers ≠' in out and '**1, 3, 4, 5**' in out  # SR-ViT's units' last layers, bold
    assert '`model.backbone.num_recursions` = 4: why' in out


@pytest.mark.parametrize(
    'change, key, kind',
    [
        ('optim_wrapper = dict(optimizer=dict(lr=2e-3))', 'optim_wrapper.optimizer.lr', 'NOT DECLARED'),
        ('model = dict(backbone=dict(out_indices=(2, 3, 4, 5)))', 'feature_layers', 'WRONG VALUE'),
        ('model = dict(backbone=dict(num_recursions=2))', 'model.backbone.num_recursions', 'WRONG VALUE'),
        (
            'test_dataloader = dict(dataset=dict(pipeline=[dict(type="LoadImageFromFile"), '
            'dict(type="Resize", scale=(320, 320), keep_ratio=True), dict(type="PackDetInputs")]))',
            'gflops',
            'WRONG VALUE',
        ),
        ('train_dataloader = dict(batch_size=4)', 'train_dataloader.batch_size', 'NOT DECLARED'),
    ],
    ids=['lr', 'out_indices', 'num_recursions', 'test_size', 'batch'],
)
def test_one_changed_value_in_a_config_fails_check(family, tmp_path, change, key, kind):
    """Issue 45.1: a value changed in the config (not in its file name) is a difference the recipe does not declare
    with that value."""
    paths, rows, table = family
    changed = write(tmp_path, 'variant.py', change, base=paths[1])
    findings = card_check.check([rows[0], card.recipe_row(changed, REPO, measured=card.measured_table(table))])
    assert (kind, key) in {(f.kind, f.key) for f in findings}
    assert compare.main([paths[0], changed, '--check', '--measured', table]) == 1


def test_a_declaration_must_hold_its_value_and_name_a_difference(family, tmp_path, capsys):
    paths, rows, table = family
    lr = 'optim_wrapper = dict(optimizer=dict(lr=2e-3))'
    right = write(
        tmp_path, 'right.py', lr, "recipe = dict(differs={'optim_wrapper.optimizer.lr': (2e-3, 'why')})", base=paths[1]
    )
    wrong = write(
        tmp_path, 'wrong.py', lr, "recipe = dict(differs={'optim_wrapper.optimizer.lr': (3e-3, 'why')})", base=paths[1]
    )
    stale = write(
        tmp_path, 'stale.py', "recipe = dict(differs={'optim_wrapper.optimizer.lr': (1e-3, 'why')})", base=paths[1]
    )
    assert compare.main([paths[0], right, '--check', '--measured', table]) == 0
    assert compare.main([paths[0], wrong, '--check', '--measured', table]) == 1
    assert 'WRONG VALUE: wrong: `optim_wrapper.optimizer.lr` = 0.002: declared 0.003' in capsys.readouterr().out
    assert compare.main([paths[0], stale, '--check', '--measured', table]) == 1
    assert 'STALE: stale: `optim_wrapper.optimizer.lr`' in capsys.readouterr().out
    assert compare.main([paths[0], stale]) == 0  # without --check: the card only


def test_a_measured_value_is_declared_in_the_table_under_the_recipes_name(family, tmp_path, capsys):
    """A recipe without its line in the measured table lacks its values (--suggest prints the line); a config that
    still writes `recipe.measured`, or a table entry that is not a mapping of measured facts, is refused in one line."""
    paths, rows, table = family
    unlisted = write(tmp_path, 'unlisted.py', base=paths[1])
    assert compare.main([paths[0], unlisted, '--check', '--measured', table]) == 1
    assert 'NO VALUE: unlisted: `gflops` = ' in capsys.readouterr().out
    assert compare.main([paths[0], unlisted, '--suggest', '--measured', table]) == 0
    line = capsys.readouterr().out.split('configs/measured.yml:\n')[1].splitlines()[0]
    assert line == card.table_line('unlisted', rows[1].recipe['measured'])
    inline = write(tmp_path, 'inline.py', 'recipe = dict(measured=dict(params=1.0))', base=paths[1])
    with pytest.raises(SystemExit):
        compare.main([paths[0], inline, '--measured', table])
    assert 'inline.py: recipe.measured: the measured values of a recipe are in configs/measured.yml' in (
        capsys.readouterr().err
    )
    bad = tmp_path / 'bad.yml'
    bad.write_text('srvit: {gflop: 1.0}\n')
    with pytest.raises(SystemExit):
        compare.main([*paths[:2], '--measured', str(bad)])
    assert "srvit: ['gflop'] is not a mapping of measured facts (params, gflops," in capsys.readouterr().err
    bad.write_text('srvit: {gflops: 1.0\n')
    with pytest.raises(SystemExit):
        compare.main([*paths[:2], '--measured', str(bad)])
    err = capsys.readouterr().err
    assert 'bad.yml: not a YAML table of measured facts:' in err and len(err.strip().splitlines()) == 1


def test_every_line_of_the_measured_table_names_a_recipe_of_the_repository():
    """A renamed recipe leaves no line behind: every name in configs/measured.yml is a config's file name."""
    names = {path.stem for path in (REPO_PATH / 'configs').rglob('*.py') if '_base_' not in path.parts}
    assert set(card.measured_table(REPO_PATH / card.MEASURED_TABLE)) - names == set()


def test_a_start_other_than_the_papers_is_declared_with_which(family, tmp_path, capsys):
    paths, _, table = family
    base = write(
        tmp_path, 'paper.py', "recipe = dict(paper_start='configs/cls/srvit-small_4xb256_in1k.py')", base=paths[1]
    )
    assert (
        compare.main([paths[0], base, '--check', '--measured', table]) == 1
    )  # its toy starts from scratch, not its paper's start
    assert 'NOT ITS PAPER START' in capsys.readouterr().out
    why = "recipe = dict(differs={'paper_start': ('random init', 'a toy: from scratch')})"
    assert compare.main([paths[0], write(tmp_path, 'toy.py', why, base=base), '--check', '--measured', table]) == 0


def test_a_start_says_what_made_it_from_its_recipe_and_its_measured_top1_from_its_meta(tmp_path):
    """made_by's recipe (its --cfg-options applied) gives the pretraining facts, a distillation's its teacher and
    layers; the top-1 is the checkpoint meta's, or 'not measured' with a line naming a file without meta."""
    deit = card_start.start_facts(dict(checkpoint='checkpoints/deit_base_patch16_224-b5f2ef4d.pth'), REPO)
    assert deit[0]['start.made_by'] == card_start.RELEASE and deit[1]['top1'] == '81.8 (DeiT paper)'
    edge = Config.fromfile(osp.join(REPO, 'configs/_base_/backbones/edgerecvit-b_in1k.py')).backbone.init_cfg
    facts, cells, notes = card_start.start_facts(edge, REPO)
    assert facts['start.made_by'] == 'configs/cls/edgerecvit-base_deit-pre_8xb256-300e_in1k.py'
    assert facts['pretraining.from'] == 'DeiT-B' and facts['pretraining.loss'].startswith('CCE')
    assert cells['top1'] == 'not measured (file absent)' and not notes
    recipe = 'configs/cls/srvit-small_4xb256_in1k.py'
    made_by = f'python tools/train.py {recipe} --cfg-options warmup_epochs=3 param_scheduler.0.end=3 && cp x y'
    path = tmp_path / 'srvit.pth'
    torch.save({'state_dict': {'w': torch.zeros(1)}, 'meta': {}}, path)
    facts, cells, notes = card_start.start_facts(dict(checkpoint=str(path), made_by=made_by), REPO)
    assert facts['pretraining.warmup_epochs'] == 3 and 'param_scheduler.0.end=3' in facts['start.made_by']
    assert cells['top1'] == 'not measured (no meta)' and "no meta['mmrecvit_start']" in notes[0]
    checkpoint = torch.load(path)
    update_start_meta(checkpoint, imagenet_top1=81.23, val_images=50000, val_dataset='ImageNet')
    torch.save(checkpoint, path)
    _, cells, notes = card_start.start_facts(dict(checkpoint=str(path), made_by=made_by), REPO)
    assert cells['top1'] == '81.2 (ImageNet, 50000 images; meta)' and not notes
    distill = Config.fromfile(osp.join(REPO, 'configs/_base_/backbones/revit-b_distill.py')).backbone.init_cfg
    facts = card_start.start_facts(distill, REPO)[0]
    assert facts['pretraining.loss'] == 'feature MSE to deit_base_patch16_224.fb_in1k, layers pyramid'
    assert facts['pretraining.from'] == 'DeiT-B'
    with pytest.raises(card_start.StartError, match='does not exist'):
        card_start.start_facts(dict(checkpoint='x.pth', made_by='python tools/train.py configs/cls/nope.py'), REPO)


def test_a_start_file_without_meta_is_one_line_naming_it(family, tmp_path, capsys):
    paths, _, table = family
    start = tmp_path / 'srvit-tiny_in1k.pth'
    backbone = Config.fromfile(paths[1]).model.backbone
    torch.save({'state_dict': card.build_backbone(backbone.to_dict()).state_dict()}, start)
    made_by = 'python tools/train.py configs/cls/srvit-ti_1xb32-200it_toy-cls.py'
    init = dict(type='Pretrained', checkpoint=str(start), made_by=made_by)
    init = f'model = dict(backbone=dict(_delete_=True, **{dict(backbone.to_dict(), init_cfg=init)!r}))'
    assert (
        compare.main([paths[0], write(tmp_path, 'started.py', init, base=paths[1]), '--check', '--measured', table])
        == 1
    )
    out = capsys.readouterr().out
    assert f"NO MEASURED TOP-1: started: start checkpoint {str(start)!r} has no meta['mmrecvit_start']" in out
    assert 'not measured (no meta)' in out


@pytest.mark.parametrize('method', ['PlainViT', 'SRViT', 'EdgeRecViT', 'ReViT', 'MoRViT'])
@pytest.mark.parametrize('with_cp', [False, True])
def test_training_gflops_are_what_a_training_step_executes(method, with_cp):
    """train_gflops (forward, backward, with_cp's recomputation up to each block's last saved tensor) against torch's
    FlopCounterMode on one training step (math attention, whose products it counts): equal where the whole step is
    the blocks' products; reViT's gate-weighted merge within 2 %, MoR-ViT's token subsets under with_cp (they
    recompute a little more than a full block's last saved tensor) within 6 %."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from mmrecvit.models import BACKBONES

    kwargs = dict(MoRViT=dict(num_recursions=4), SRViT=dict(unit_sizes=(2, 2, 1, 1)), ReViT=dict(step_drop_rate=0.0))
    depth = {} if method == 'MoRViT' else dict(depth=6)
    model = BACKBONES[method](arch='tiny', with_cp=with_cp, **depth, **kwargs.get(method, {}))
    cfg = Config(dict(model=dict(data_preprocessor=dict()), train_dataloader=dict(dataset=dict(pipeline=[
        dict(type='RandomCrop', crop_size=(96, 96))])), test_dataloader=dict(dataset=dict(pipeline=[
        dict(type='Resize', scale=(96, 96))]))))  # fmt: skip
    facts, _ = card.backbone_facts(cfg, model, None)
    model.train()
    torch.manual_seed(0)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        sum(o.float().mean() for o in model(torch.zeros(1, 3, 96, 96))).backward()
    measured = counter.get_total_flops() / 1e9
    if method in ('PlainViT', 'SRViT', 'EdgeRecViT') or not with_cp and method != 'ReViT':
        assert facts['train_gflops'] == card.gflops(counter.get_total_flops())
    else:
        assert facts['train_gflops'] == pytest.approx(measured, rel=0.06 if method == 'MoRViT' else 0.02)


def test_bad_input_is_one_clear_line_and_the_card_is_written_only_where_asked(family, tmp_path, capsys):
    paths, _, table = family
    with pytest.raises(SystemExit):
        compare.main([paths[0]])
    assert 'two recipes or more' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        compare.main([paths[0], str(tmp_path / 'nope.py')])
    assert 'no such file' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        compare.main([*paths[:2], '--out', str(tmp_path / 'c.md')])
    assert '--out needs --title' in capsys.readouterr().err
    files = ['git', '-C', REPO, 'status', '--porcelain', '--ignored=traditional', '-uall']  # ignored ones one by one
    before = subprocess.run(files, capture_output=True, text=True, check=True).stdout
    assert compare.main(paths[:2]) == 0
    assert subprocess.run(files, capture_output=True, text=True, check=True).stdout == before  # nothing written
    out = tmp_path / 'cards.md'
    out.write_text('# Cards\n')
    for _ in range(2):  # the second run replaces the card of its title
        assert compare.main([*paths[:2], '--out', str(out), '--title', 'Toy']) == 0
    text = out.read_text()
    assert text.startswith('# Cards\n') and text.count('<!-- card: Toy -->') == 1 and text.count('### Toy') == 1


FAMILIES = {  # docs/comparison.md's cards: their config-level declarations (the measured ones: test_a_real_family)
    name: [osp.join(REPO, p) for p in paths] for name, paths in compare.CARDS.items()
}


@pytest.mark.parametrize('name', sorted(FAMILIES))
def test_every_card_of_the_docs_declares_every_difference_of_its_config_and_method(name):
    rows = [card.recipe_row(p, REPO, measure=False) for p in FAMILIES[name]]
    wrong = [f for f in card_check.check(rows, measured=False) if f.kind != 'declared']
    assert not wrong, '\n'.join(map(str, wrong))


@pytest.mark.slow
def test_a_real_family_passes_check_with_its_measured_values():
    """The ADE20K UperNet 160k card (the cheapest at S: 512x512, global attention), forwards and all."""
    assert compare.main([*FAMILIES['ADE20K, UperNet 160k (mmseg)'], '--check']) == 0


@pytest.mark.parametrize(
    'recipe, test, train',
    [
        ('configs/det/mask-rcnn_plainvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', (1024, 1024), (1024, 1024)),
        ('configs/det/mask-rcnn_plainvit-s_fpn_1x_coco.py', (800, 800), (800, 800)),  # keep_ratio (1333, 800)
        ('configs/seg/upernet_plainvit-s_8xb2-160k_ade20k-512x512.py', (512, 512), (512, 512)),
        ('configs/seg/upernet_plainvit-s_8xb2-amp-ld0.95-160k_ade20k-512x512.py', (512, 512), (512, 512)),  # slide
        ('configs/cls/plainvit-small_4xb256_in1k.py', (224, 224), (224, 224)),
    ],
)
def test_the_sizes_are_one_square_image_as_the_pipelines_make_it(recipe, test, train):
    cfg = Config.fromfile(osp.join(REPO, recipe))
    assert card.test_size(cfg) == test and card.train_size(cfg) == train
