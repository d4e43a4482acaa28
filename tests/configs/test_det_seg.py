"""Every config loads on a machine without COCO/ADE20K, and the toy/real pairs stay in step (issue 3).

The config tree (STYLE.md practice 11): a real recipe base per task; per-method real configs that set
only `model.backbone`, taken from the method's one backbone file (configs/_base_/backbones/, their second
`_base_`) and merged into the base's; a toy base that inherits the real base and changes only data, schedule
and size; per-method toy configs that take the method's toy-size backbone file the same way. mmengine forbids
duplicate keys among several `_base_` files, so a toy cannot literally be "its twin + a toy fragment": the tests
below hold the pairs together instead.
"""

import ast
import glob
import os.path as osp

import pytest
from helpers import REPO, cached_config

from mmrecvit.datasets import TOY_COCO_CLASSES, TOY_COCO_PALETTE
from mmrecvit.models import BACKBONES

# configs/cls: tests/configs/test_cls.py
CONFIGS = sorted(p for task in ('det', 'seg') for p in glob.glob(f'{REPO}/configs/{task}/*.py'))
REAL = [p for p in CONFIGS if '_toy-' not in p]
TOY = [p for p in CONFIGS if '_toy-' in p]
TOY_BASES = sorted(
    p for task in ('det', 'seg') for p in glob.glob(f'{REPO}/configs/{task}/_base_/*.py') if '_toy-' in p
)
# What a toy config may change in its real twin's backbone: the size (and with it the steps or units
# read out), the pretrained weights a toy does not load, and the stochastic depth of a short run from scratch.
SIZE_KEYS = {
    'arch',
    'depth',
    'num_blocks',
    'unit_sizes',
    'num_recursions',
    'shared_init_block',
    'out_indices',
    'out_units',
    'init_cfg',
    'drop_path_rate',
    'router_alpha',  # MoR-ViT's toys keep the gate scale their figures were measured with (backbones/morvit-toy.py)
}
# What the toy base may change in the real base's backbone: ViT-Ti width, no pretrained weights, no
# stochastic depth. Not `depth` (a per-method size: SRViT and MoRViT take none) and not the type.
TOY_BASE_KEYS = {'arch', 'init_cfg', 'drop_path_rate'}


def method_of(path):
    name = osp.basename(path)
    return name.split('_')[1].split('-')[0]  # mask-rcnn_srvit-s_fpn_... / upernet_srvit-ti_1xb4-... -> srvit


def rel(path):
    return osp.relpath(path, REPO)


def bases_of(path):
    """The files a config's `_base_` names, in order."""
    tree = ast.parse(open(path).read())
    (bases,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == '_base_' for t in node.targets)
    ]
    return [osp.normpath(osp.join(osp.dirname(path), b)) for b in ([bases] if isinstance(bases, str) else bases)]


def base_of(path):
    """The recipe a config stands on: its first `_base_` (a per-method config's second is its backbone file)."""
    return bases_of(path)[0]


def resolved(path):
    """The fully merged config as a plain dict (a copy: callers may pop)."""
    return cached_config(path).to_dict()


def differing_keys(a, b):
    return sorted(k for k in set(a) | set(b) if k not in a or k not in b or a[k] != b[k])


def is_variant(path):
    """A variant of a per-method config (reViT's `-elastic`): that config with backbone arguments changed."""
    return '-elastic_' in osp.basename(path)


def twin_of(toy):
    """The real config of the same task and method on the recipe the toy's base inherits (a method has real
    configs on several recipes; the toy twins the one its base shrinks)."""
    real_base = base_of(base_of(toy))
    (twin,) = [p for p in REAL if method_of(p) == method_of(toy) and not is_variant(p) and base_of(p) == real_base]
    return twin


@pytest.mark.slow
@pytest.mark.parametrize('path', CONFIGS, ids=[rel(p) for p in CONFIGS])
def test_config_loads_and_backbone_builds(path):
    cfg = cached_config(path)
    assert cfg.default_scope in ('mmdet', 'mmseg')
    assert 'mmrecvit.mm' in cfg.custom_imports['imports']  # registration lives in mmrecvit.mm (issue 47.1)
    assert any(h['type'] == 'RecursionHook' for h in cfg.custom_hooks)
    backbone = dict(cfg.model.backbone)
    backbone.pop('init_cfg', None)  # the real configs point at DeiT weights that are not on this machine
    model = BACKBONES[backbone.pop('type')](**backbone)
    neck = cfg.model.neck[0] if isinstance(cfg.model.neck, list) else cfg.model.neck
    assert neck['type'] == 'SimplePyramid' and neck['in_channels'] == model.embed_dim


def test_every_method_has_a_real_and_a_toy_config_per_task():
    for task in ('det', 'seg'):
        real = {method_of(p): p for p in REAL if f'/configs/{task}/' in p}
        toy = {method_of(p): p for p in TOY if f'/configs/{task}/' in p}
        assert sorted(real) == sorted(toy), task


@pytest.mark.parametrize('toy', TOY, ids=[rel(p) for p in TOY])
def test_toy_backbone_is_its_twins_at_toy_size(toy):
    """Toy = real twin with only the size changed: the same backbone type and method arguments."""
    twin = twin_of(toy)
    toy_backbone, twin_backbone = resolved(toy)['model']['backbone'], resolved(twin)['model']['backbone']
    changed = [k for k in differing_keys(toy_backbone, twin_backbone) if k not in SIZE_KEYS]
    assert not changed, (
        f'{rel(toy)} and its twin {rel(twin)} differ in backbone arguments that are not sizes '
        f'{sorted(SIZE_KEYS)}: '
        + ', '.join(
            f'{k}: toy {toy_backbone.get(k, "<unset>")!r}, twin {twin_backbone.get(k, "<unset>")!r}' for k in changed
        )
    )


@pytest.mark.parametrize('path', CONFIGS, ids=[rel(p) for p in CONFIGS])
def test_a_method_config_sets_only_its_backbone(path):
    """A per-method config (real or toy) is its base with the method's backbone file's `backbone` merged into
    `model.backbone`: everything else (data, schedule, neck, heads) comes from the base, and the base's backbone
    arguments are kept. Its `recipe` may list only the backbone file's entries as intended differences
    (tools/analysis_tools/recipe_diff.py)."""
    base = base_of(path)
    if is_variant(path):
        assert base == path.replace('-elastic_', '_'), f'{rel(path)} must inherit its fixed-depth twin, not {rel(base)}'
    else:
        assert osp.basename(osp.dirname(base)) == '_base_', f'{rel(path)} must inherit a _base_ recipe, not {rel(base)}'
        size = 'toy' if '_toy-' in path else path.split(f'_{method_of(path)}-')[1][0]  # s, b
        helpers = osp.join(REPO, 'configs', '_base_')  # widths.py: the ViT-B / Ti recipes' helpers, not a recipe
        (backbone_file,) = [b for b in bases_of(path)[1:] if osp.dirname(b) != helpers]
        assert osp.basename(backbone_file).startswith(f'{method_of(path)}-{size}'), (rel(path), rel(backbone_file))
    assert ('_toy-' in path) == ('_toy-' in base), f'{rel(path)} inherits {rel(base)}'
    cfg, base_cfg = resolved(path), resolved(base)
    backbone = cfg['model'].pop('backbone')
    base_cfg['model'].pop('backbone')
    if not is_variant(path):  # the backbone file's arguments (a variant changes its twin's)
        assert all(backbone[k] == v or isinstance(v, dict) for k, v in cfg['backbone'].items()), rel(path)
    added = set(cfg.get('recipe', {}).get('intended', {})) - set(base_cfg.get('recipe', {}).get('intended', {}))
    own = set(cfg['backbone_recipe']['intended'])  # the backbone file's entries
    assert added <= own, f'{rel(path)} lists more than its backbone file: {added - own}'
    if 'temperature_schedule' in cfg:  # Edge-RecViT's file: its hook joins the base's (it trains as it tests)
        assert cfg.pop('custom_hooks') == base_cfg.pop('custom_hooks') + [cfg['temperature_schedule']]
    variables = ('backbone', 'backbone_recipe', 'temperature_schedule')  # the backbone file's
    changed = [k for k in differing_keys(cfg, base_cfg) if k not in ('model', 'recipe', *variables)]
    changed += [f'model.{k}' for k in differing_keys(cfg['model'], base_cfg['model'])]
    assert not changed, f'{rel(path)} changes more than model.backbone: {changed}'
    assert '_delete_' not in open(path).read(), f'{rel(path)}: merge into the base backbone, do not reset it'


@pytest.mark.parametrize('toy_base', TOY_BASES, ids=[rel(p) for p in TOY_BASES])
def test_toy_base_changes_only_the_size_of_the_real_backbone(toy_base):
    real_base = base_of(toy_base)
    assert '_toy-' not in real_base, f'{rel(toy_base)} must inherit the real recipe, not {rel(real_base)}'
    toy_backbone = resolved(toy_base)['model']['backbone']
    real_backbone = resolved(real_base)['model']['backbone']
    changed = set(differing_keys(toy_backbone, real_backbone))
    assert changed <= TOY_BASE_KEYS, (
        f'{rel(toy_base)} changes the real backbone beyond {sorted(TOY_BASE_KEYS)}: {sorted(changed - TOY_BASE_KEYS)}'
    )


def test_toy_det_metainfo_matches_the_generator():
    cfg = cached_config(f'{REPO}/configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py')
    meta = cfg.train_dataloader.dataset.metainfo
    assert tuple(meta['classes']) == TOY_COCO_CLASSES
    assert [tuple(c) for c in meta['palette']] == [tuple(c) for c in TOY_COCO_PALETTE]
    assert cfg.model.roi_head.bbox_head.num_classes == len(TOY_COCO_CLASSES)
