"""recipe_diff reads a recipe and its anchor from their own files; every difference must be listed (issue 28.1).

Covered here: the ADE20K UperNet family against mmseg's vit_deit-s16 160k file, the ImageNet families (from scratch,
from DeiT) against mmpretrain's deit-small_4xb256_in1k, and the COCO families: the ViTDet Mask R-CNN and Cascade
recipes (every method, S and B, elastic) against mmdet's projects/ViTDet file (vendored), the 1x and 3x recipes
against mmdet's own mask-rcnn_r50_fpn_1x / ms-poly-3x files. The detectron2 ViTDet family (LazyConfigs):
test_recipe_diff_d2.py.
"""

import glob
import os.path as osp
import shutil
import sys

import pytest
from helpers import REPO

sys.path.insert(0, osp.join(REPO, 'tools', 'analysis_tools'))
import recipe_diff  # noqa: E402  (tools/analysis_tools/recipe_diff.py)

SEG_RECIPES = sorted(glob.glob(osp.join(REPO, 'configs', 'seg', 'upernet_*-[sbt]*_8xb2-*_ade20k-512x512.py')))
# from scratch, from DeiT, the ViT-B starts, the papers' ablations
CLS_RECIPES = sorted(glob.glob(osp.join(REPO, 'configs', 'cls', '*-[sb][ma]*_*in1k.py')))
# every COCO recipe and its _base_ (the toys are not recipes; _base_/models and _base_/recipes are parts of them)
DET_RECIPES = sorted(
    p
    for p in glob.glob(osp.join(REPO, 'configs', 'det', '*.py'))
    + glob.glob(osp.join(REPO, 'configs', 'det', '_base_', '*.py'))
    if '_toy-' not in p
)
DET = osp.join(REPO, 'configs', 'det', '_base_')
VITDET = osp.join(DET, 'mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py')
CASCADE = osp.join(DET, 'cascade-mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py')
FPN_1X = osp.join(DET, 'mask-rcnn_vit_fpn_1x_coco.py')
FPN_3X = osp.join(DET, 'mask-rcnn_vit_fpn_8xb2-ms-crop-3x_coco.py')


def test_the_families_are_found():
    assert (len(SEG_RECIPES), len(CLS_RECIPES), len(DET_RECIPES)) == (22, 21, 49)
    anchors = {recipe_diff.recipe_of(recipe_diff.Config.fromfile(p), p)['anchor'] for p in DET_RECIPES}
    assert len(anchors) == 3  # mmdet's projects/ViTDet, r50 1x, r50 ms-poly 3x


@pytest.mark.parametrize('path', SEG_RECIPES + CLS_RECIPES + DET_RECIPES, ids=osp.basename)
def test_every_difference_from_the_anchor_is_listed_and_every_listed_one_exists(path):
    found, unlisted, stale, _ = recipe_diff.compare(path)
    assert found, 'a recipe of ours cannot equal its anchor'
    assert not unlisted, f'differences the recipe does not list: {sorted(unlisted)}'
    assert not stale, f'listed differences that are not found: {sorted(stale)}'


@pytest.mark.parametrize(
    'base, change, key',
    [
        (SEG_RECIPES[0], 'optim_wrapper = dict(optimizer=dict(lr=1e-4))', 'optim_wrapper.optimizer.lr'),
        (
            SEG_RECIPES[0],
            "train_pipeline = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', reduce_zero_label=False)]",
            'train_pipeline.LoadAnnotations.reduce_zero_label',
        ),
        (SEG_RECIPES[0], 'train_dataloader = dict(batch_size=4)', 'train_dataloader.batch_size'),
        (
            VITDET,
            "train_pipeline = [dict(type='RandomResize', scale=(1024, 1024), ratio_range=(0.5, 2.0))]",
            'train_pipeline.RandomResize.ratio_range',
        ),
        (VITDET, "param_scheduler = [dict(type='LinearLR', end=500)]", 'param_scheduler.LinearLR.end'),
        (CASCADE, 'train_dataloader = dict(batch_size=2)', 'train_dataloader.batch_size'),
        (
            FPN_1X,
            "param_scheduler = [dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=1000), "
            "dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 10], gamma=0.1)]",
            'param_scheduler.MultiStepLR.milestones',
        ),
        # differences by design at a value the recipe does not expect (`expected`): listed, still refused
        (FPN_1X, 'optim_wrapper = dict(optimizer=dict(lr=2e-4))', 'optim_wrapper.optimizer.lr'),
        (FPN_3X, 'model = dict(backbone=dict(drop_path_rate=0.2))', 'model.backbone.drop_path_rate'),
        (FPN_3X, 'train_dataloader = dict(batch_size=4)', 'train_dataloader.batch_size'),
    ],
    ids=lambda v: osp.basename(v) if isinstance(v, str) and v.endswith('.py') else None,
)
def test_a_changed_value_is_an_unlisted_difference(tmp_path, base, change, key):
    ours = tmp_path / 'changed.py'
    ours.write_text(f"_base_ = '{base}'\n{change}\n")
    unlisted = recipe_diff.compare(str(ours)).unlisted
    assert key in unlisted
    assert recipe_diff.main([str(ours), '--check']) == 1
    assert recipe_diff.main([base, '--check']) == 0


def test_an_inserted_pipeline_step_is_one_difference():
    a = {'p': [dict(type='Load'), dict(type='Check', n=1), dict(type='Crop', size=4)]}
    b = {'p': [dict(type='Load'), dict(type='Crop', size=4)]}
    assert recipe_diff.diff(a, b) == {'p.Check': ('step', recipe_diff.ABSENT)}
    assert recipe_diff.diff(a, {'p': [dict(type='Crop', size=4), dict(type='Load'), dict(type='Check', n=1)]}) == {
        'p': ('Load > Check > Crop', 'Crop > Load > Check')
    }


def test_an_unknown_anchor_scope_is_named():
    with pytest.raises(ValueError, match=r"unknown scope 'mmfoo'.*mmdet, mmseg, mmpretrain"):
        recipe_diff.resolve('mmfoo::x.py')


def test_a_config_that_is_not_a_recipe_is_named(tmp_path):
    anchor = str(recipe_diff.resolve('mmseg::vit/vit_deit-s16_upernet_8xb2-160k_ade20k-512x512.py'))
    with pytest.raises(ValueError, match='is not a recipe'):
        recipe_diff.compare(anchor)


def test_the_key_map_renames_our_prefix_and_refuses_a_collision():
    assert recipe_diff.renamed({'a.b.c': 1, 'a.t': 2}, {'a.b.': 'a.', 'a.t': 'r.t'}) == {'a.c': 1, 'r.t': 2}
    with pytest.raises(ValueError, match='two of our keys map to one anchor key'):
        recipe_diff.renamed({'a.b.c': 1, 'a.c': 2}, {'a.b.': 'a.'})


# ---- what a reader sees (issue 41, item 6) ------------------------------------------------------------------
SEG_BASE = osp.join(REPO, 'configs', 'seg', '_base_', 'upernet_vit_8xb2-160k_ade20k-512x512.py')
SRVIT_SEG = osp.join(REPO, 'configs', 'seg', 'upernet_srvit-s_8xb2-160k_ade20k-512x512.py')


def test_the_output_names_both_files_and_no_comment_it_cannot_show(capsys):
    assert recipe_diff.main([SRVIT_SEG]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    anchor = 'mmseg::vit/vit_deit-s16_upernet_8xb2-160k_ade20k-512x512.py'
    assert lines[0] == f'ours:   {SRVIT_SEG}'
    assert lines[1] == f'anchor: {anchor} ({recipe_diff.resolve(anchor)})'
    assert '(above)' not in out
    base = osp.relpath(SEG_BASE)
    (hooks,) = [line for line in lines if line.startswith('custom_hooks.TF32Hook.type')]
    text = open(SEG_BASE).read().splitlines()
    line = next(i for i, s in enumerate(text) if s.startswith('custom_hooks ='))  # what the output points at
    assert text[line - 1].startswith('# TF32Hook')
    assert hooks.endswith(
        f'# RecursionHook, RNGStateHook, TF32Hook (the comment above custom_hooks in {base}:{line + 1})'
    )


def test_a_plain_value_against_a_subtree_is_shown_once_as_the_subtree():
    """mmseg's `model.neck=None` against our SimplePyramid: no `model.neck ours=<absent>` beside its own keys."""
    ours = {'model': {'neck': {'type': 'SimplePyramid', 'in_channels': 384}}}
    anchor = {'model': {'neck': None}}
    assert recipe_diff.diff(ours, anchor) == {
        'model.neck.in_channels': (384, '<absent: model.neck=None>'),
        'model.neck.type': ('SimplePyramid', '<absent: model.neck=None>'),
    }
    assert recipe_diff.diff(anchor, ours)['model.neck.type'] == ('<absent: model.neck=None>', 'SimplePyramid')


def test_the_most_specific_listed_pattern_gives_the_reason(tmp_path, capsys):
    """A base's wildcard written for the anchor's own arguments must not explain a key a derived recipe lists."""
    intended = {'model.backbone.[aeimnpqw]*[!h]': 'mmseg VisionTransformer arguments', 'model.backbone.num_*': 'ours'}
    assert recipe_diff.listed_by('model.backbone.num_recursions', intended) == 'model.backbone.num_*'
    assert recipe_diff.listed_by('model.backbone.num_layers', {**intended, 'model.backbone.num_layers': 'x'}) == (
        'model.backbone.num_layers'
    )
    assert recipe_diff.listed_by('model.neck', intended) is None
    ours = tmp_path / 'srvit.py'
    ours.write_text(
        f"_base_ = '{SRVIT_SEG}'\n"
        "recipe = dict(intended={'model.backbone.num_recursions': 'T, the recursions of every unit'})\n"
    )
    assert recipe_diff.main([str(ours), '--check']) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith('model.backbone.num_recursions')]
    assert line.endswith('# T, the recursions of every unit')


def test_a_staged_vendor_tree_follows_the_installed_package(tmp_path, monkeypatch):
    # CI failed (stop 43): a tree staged by a removed clone kept its link to that clone's venv, so every ViTDet anchor
    # named a missing `configs/_base_` file. Each installed package now gets its own staged tree.
    monkeypatch.setattr(recipe_diff, 'CACHE', tmp_path / 'cache')
    for env in ('old', 'new'):
        base = tmp_path / env / 'configs' / '_base_'
        base.mkdir(parents=True)
        (base / 'model.py').write_text(f'env = {env!r}\n')
    anchor = 'vendor::mmdet-vitdet-394f758/configs/_base_/model.py'
    monkeypatch.setattr(recipe_diff, '_package_configs', lambda package: tmp_path / 'old' / 'configs')
    assert recipe_diff.load(anchor)['env'] == 'old'
    shutil.rmtree(tmp_path / 'old')
    monkeypatch.setattr(recipe_diff, '_package_configs', lambda package: tmp_path / 'new' / 'configs')
    assert recipe_diff.load(anchor)['env'] == 'new'
