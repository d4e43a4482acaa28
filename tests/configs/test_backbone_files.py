"""Each method's backbone is written once (issue 39.8): configs/_base_/backbones/<method>-<size>[_<start>].py, which
every recipe of the method (cls, det, seg, detectron2) takes its backbone from; no recipe repeats a backbone dict."""

import ast
import glob
import os.path as osp
import re

import pytest
from helpers import REPO, cached_config

from mmrecvit.models import BACKBONES

FILES = sorted(glob.glob(f'{REPO}/configs/_base_/backbones/*.py'))
METHODS = ['plainvit', 'naiverecvit', 'srvit', 'revit', 'edgerecvit', 'morvit']
# every per-method config of the OpenMMLab tasks (not the task bases) and of detectron2
MM = sorted(p for task in ('cls', 'det', 'seg') for p in glob.glob(f'{REPO}/configs/{task}/*.py'))
D2 = sorted(
    p for p in glob.glob(f'{REPO}/configs/d2/**/*.py', recursive=True) if re.search(rf'_({"|".join(METHODS)})_', p)
)
VARIABLE_ENTRIES = ('backbone.*', 'backbone_recipe.*')


def rel(path):
    return osp.relpath(path, REPO)


def method_of(path):
    name = osp.basename(path)
    return next(m for m in METHODS if re.search(rf'(^|[_-]){m}[_-]', name))


def bases_of(path):
    (bases,) = [
        ast.literal_eval(node.value)
        for node in ast.parse(open(path).read()).body
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == '_base_' for t in node.targets)
    ]
    return [osp.normpath(osp.join(osp.dirname(path), b)) for b in ([bases] if isinstance(bases, str) else bases)]


def test_every_method_has_its_files():
    names = {osp.basename(p)[:-3] for p in FILES}
    for m in METHODS:
        assert {f'{m}-s', f'{m}-toy'} <= names, m
        assert any(n.startswith(f'{m}-s_') for n in names) and any(n.startswith(f'{m}-b_') for n in names), m


@pytest.mark.parametrize('path', FILES, ids=[osp.basename(p) for p in FILES])
def test_a_backbone_file_holds_one_registered_backbone_and_why_its_arguments_differ(path):
    cfg = cached_config(path).to_dict()
    extra = {'temperature_schedule'} if method_of(path) == 'edgerecvit' else set()  # it trains as it tests
    references = {'references'} if re.search(r'plainvit-(b|ti)_deit', path) else set()  # widths.references
    assert set(cfg) == {'backbone', 'backbone_recipe'} | extra | references, f'{rel(path)}: only the method variables'
    assert cfg['backbone']['type'] in BACKBONES
    assert osp.basename(path).startswith(method_of(path)) and cfg['backbone']['type'] == type_of(method_of(path))
    intended = cfg['backbone_recipe']['intended']
    hook = ('temperature_schedule.*', 'custom_*hooks.TemperatureScheduleHook*') if extra else ()  # Edge-RecViT's
    for key in intended:
        assert key in VARIABLE_ENTRIES + hook or key.startswith('model.backbone.'), (rel(path), key)
    if path.endswith('-toy.py'):  # the toys' sizes: no recipe of them is compared with an anchor
        return
    args = {f'model.backbone.{k}' for k in cfg['backbone'] if k not in ('type', 'arch', 'init_cfg')}
    explained = {k for k in intended if k.startswith('model.backbone.')}
    assert args <= explained, f'{rel(path)}: arguments without a why: {sorted(args - explained)}'


def type_of(method):
    return {
        'plainvit': 'PlainViT',
        'naiverecvit': 'NaiveRecursiveViT',
        'srvit': 'SRViT',
        'revit': 'ReViT',
        'edgerecvit': 'EdgeRecViT',
        'morvit': 'MoRViT',
    }[method]


@pytest.mark.parametrize('path', MM, ids=[rel(p) for p in MM])
def test_every_mm_recipe_takes_its_backbone_from_its_methods_file(path):
    text = open(path).read()
    assert not re.search(r"type='(" + '|'.join(BACKBONES) + ")'", text), f'{rel(path)} writes a backbone type'
    # the helpers in configs/_base_/ (widths.py: a width's facts) are not recipes
    bases = [b for b in bases_of(path) if osp.dirname(b) != osp.join(REPO, 'configs', '_base_')]
    if len(bases) == 1 and '/_base_/' not in bases[0]:
        # a variant of another recipe of the method (reViT's elastic depth, a ViT-B width, a paper's ablation):
        # that recipe's backbone with the arguments the variant is about
        assert osp.dirname(bases[0]) == osp.dirname(path) and method_of(bases[0]) == method_of(path), rel(path)
        if '-elastic_' in path:  # reViT's elastic variants: their fixed-depth twin with the paper's step dropout
            assert bases == [path.replace('-elastic_', '_')]
        return
    files = [b for b in bases if '/_base_/backbones/' in b]
    assert len(files) == 1 and osp.basename(files[0]).startswith(method_of(path) + '-'), rel(path)
    assert re.search(r'^model = dict\((type=\S+, )?backbone=(dict\()?_base_\.backbone\b', text, re.M), rel(path)
    cfg = cached_config(path)
    assert cfg.model.backbone.type == cfg.backbone.type == type_of(method_of(path))


@pytest.mark.parametrize('path', D2, ids=[rel(p) for p in D2])
def test_every_detectron2_recipe_takes_its_backbone_from_its_methods_file(path):
    text = open(path).read()
    if 'use_backbone(' not in text:  # a variant of one that does (the cascade heads)
        assert re.search(rf'from \.(toy\.)?\w*{method_of(path)}\w* import', text), rel(path)
        return
    (file,) = re.findall(r"use_backbone\(model, __file__, '([^']+)'", text)
    assert osp.basename(file).startswith(method_of(path) + '-'), rel(path)
    assert not re.search(r'\b(' + '|'.join(BACKBONES) + r')\b', text.split('use_backbone(')[0].split('import')[-1])


EDGE = [p for p in MM + D2 + sorted(glob.glob(f'{REPO}/configs/distill/*.py')) if method_of(p) == 'edgerecvit']


@pytest.mark.parametrize('path', EDGE, ids=[rel(p) for p in EDGE])
def test_every_edge_recvit_recipe_anneals_its_temperature(path):
    """Edge-RecViT trains as it tests (issues 37.3, 45.5): its depth draw's temperature scheduled in every recipe, mm's
    hook or detectron2's RecViTRCNN schedule over the run's iterations: annealed from 1.0 where its ranker is fresh,
    continued from where its start's recipe ended where it starts from a trained ranker."""
    if '/d2/' in path:
        from detectron2.config import LazyConfig

        cfg = LazyConfig.load(path)
        schedule = cfg.model.temperature_schedule
        assert schedule.end <= schedule.start and schedule.max_iter == cfg.train.max_iter  # '${train.max_iter}'
        file = re.findall(r"use_backbone\(model, __file__, '([^']+)'", open(path).read())
        if file:  # a variant (the cascade heads) takes the schedule of the recipe it imports
            backbone = cached_config(osp.normpath(osp.join(osp.dirname(path), file[0]))).backbone
            assert schedule.start == started_at(backbone), rel(path)
        return
    cfg = cached_config(path)
    hooks = [h for h in cfg.custom_hooks if h['type'] == 'TemperatureScheduleHook']
    assert len(hooks) == 1 and {'RecursionHook', 'RNGStateHook'} <= {h['type'] for h in cfg.custom_hooks}, rel(path)
    assert hooks[0]['start'] == started_at(cfg.model.backbone) and hooks[0]['end'] <= hooks[0]['start'], rel(path)


def started_at(backbone):
    """The temperature an Edge-RecViT recipe starts from (issue 45.5): 1.0 for a fresh ranker (no start, a plain ViT's
    weights), else where the recipe that made its start ended (its checkpoint's meta holds that value)."""
    made_by = re.findall(r'configs/(?:cls|distill)/\S+\.py', (backbone.get('init_cfg') or {}).get('made_by', ''))
    if not made_by:
        return 1.0
    (hook,) = [
        h for h in cached_config(osp.join(REPO, made_by[0])).custom_hooks if h['type'] == 'TemperatureScheduleHook'
    ]
    return hook['end']


DISTILLED = sorted(glob.glob(f'{REPO}/configs/_base_/backbones/*_distill*.py'))


@pytest.mark.parametrize('path', DISTILLED, ids=[osp.basename(p) for p in DISTILLED])
def test_a_distilled_start_is_the_architecture_its_recipe_distils(path):
    """The cheaper fair start (configs/distill/): the dense backbone is the student its `made_by` recipe trains."""
    backbone = cached_config(path).backbone
    (recipe,) = re.findall(r'configs/distill/\S+\.py', backbone.init_cfg.made_by)
    student = cached_config(osp.join(REPO, recipe)).model.backbone
    for key in (set(student) | set(backbone)) - {
        'init_cfg',
        'final_norm',
        'drop_path_rate',
        'step_drop_rate',
        '_delete_',
    }:
        assert backbone.get(key) == student.get(key), key
