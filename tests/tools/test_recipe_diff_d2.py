"""recipe_diff on detectron2 LazyConfigs (issue 28.1): configs/d2's ViTDet recipes against detectron2's own
projects/ViTDet configs (vendored, see recipe_diff.vendor_dir), every difference listed.

Covered: the 6 Mask R-CNN and 6 Cascade Mask R-CNN recipes and their shared base (common/mask_rcnn_recvit_100ep.py),
against mask_rcnn_vitdet_b_100ep.py and cascade_mask_rcnn_vitdet_b_100ep.py.
"""

import functools
import glob
import os.path as osp
import shutil
import sys
from pathlib import Path

import pytest
from helpers import REPO

LazyConfig = pytest.importorskip('detectron2.config').LazyConfig
sys.path.insert(0, osp.join(REPO, 'tools', 'analysis_tools'))
import recipe_diff  # noqa: E402  (tools/analysis_tools/recipe_diff.py)

from mmrecvit.mm.tooling import is_lazy_config  # noqa: E402

D2 = osp.join(REPO, 'configs', 'd2')
# the d2 recipes' backbones (use_backbone) and the helpers they call
BACKBONE_FILES = osp.join(REPO, 'configs', '_base_')
BASE = osp.join(D2, 'common', 'mask_rcnn_recvit_100ep.py')
RECIPES = sorted(glob.glob(osp.join(D2, '*_100ep.py'))) + [BASE]
VITDET = 'vendor::detectron2-02b5c4e2.tar.gz/projects/ViTDet/configs/COCO/{}_vitdet_b_100ep.py'


def test_the_family_is_found():
    names = [osp.basename(p) for p in RECIPES]
    assert (len(names), sum(n.startswith('cascade_') for n in names)) == (13, 6)


@pytest.mark.parametrize('path', RECIPES, ids=osp.basename)
def test_every_difference_from_vitdet_is_listed_and_every_listed_one_exists(path):
    found, unlisted, stale, _ = recipe_diff.compare(path)
    assert found, 'a recipe of ours cannot equal its anchor'
    assert not unlisted, f'differences the recipe does not list: {sorted(unlisted)}'
    assert not stale, f'listed differences that are not found: {sorted(stale)}'


@pytest.mark.parametrize('path', RECIPES, ids=osp.basename)
def test_a_recipe_has_only_its_declared_roots(path):
    """LazyConfig.load keeps every module-level dict of the file (it reads no __all__): no stray roots."""
    assert set(LazyConfig.load(path)) == {'dataloader', 'lr_multiplier', 'model', 'optimizer', 'train', 'recipe'}


def test_the_cascade_recipes_have_vitdets_cascade_heads():
    cascade = osp.join(D2, 'cascade_mask_rcnn_srvit_s_100ep.py')
    assert recipe_diff.load(cascade)['recipe']['anchor'] == VITDET.format('cascade_mask_rcnn')
    against_mask_rcnn = recipe_diff.compare(cascade, VITDET.format('mask_rcnn')).found
    assert 'model.roi_heads._target_' in against_mask_rcnn
    assert not [k for k in recipe_diff.compare(cascade).found if k.startswith('model.roi_heads')]


@pytest.mark.parametrize(
    'name, change, key',
    [
        ('mask_rcnn_plainvit_s_100ep.py', 'train.max_iter = 90000', 'train.max_iter'),
        ('mask_rcnn_srvit_s_100ep.py', 'optimizer.lr = 2e-4', 'optimizer.lr'),
        (
            'mask_rcnn_revit_s_100ep.py',
            'lr_multiplier.warmup_length = 1000 / train.max_iter',
            'lr_multiplier.warmup_length',
        ),
        (
            'mask_rcnn_morvit_s_100ep.py',
            'dataloader.train.mapper.augmentations[1].max_scale = 1.5',
            'dataloader.train.mapper.augmentations.ResizeScale.max_scale',
        ),
        (
            'mask_rcnn_naiverecvit_s_100ep.py',
            'optimizer.params.layer_decay_rate = 0.8',  # through the key_map
            'optimizer.params.lr_factor_func.lr_decay_rate',
        ),
        (
            'cascade_mask_rcnn_edgerecvit_s_100ep.py',
            'model.roi_heads.proposal_matchers[2].thresholds = [0.8]',
            'model.roi_heads.proposal_matchers.Matcher#3.thresholds',
        ),
        (
            'common/mask_rcnn_recvit_100ep.py',
            'dataloader.train.total_batch_size = 16',
            'dataloader.train.total_batch_size',
        ),
    ],
)
def test_a_changed_value_is_an_unlisted_difference(tmp_path, name, change, key):
    tree = tmp_path / 'd2'  # a copy of configs/d2 and the backbone files, so the relative paths resolve
    shutil.copytree(D2, tree)
    shutil.copytree(BACKBONE_FILES, tmp_path / '_base_')
    ours = tree / name
    ours.write_text(ours.read_text() + f'\n{change}\n')
    assert key in recipe_diff.compare(str(ours)).unlisted
    assert recipe_diff.main([str(ours), '--check']) == 1
    assert recipe_diff.main([osp.join(D2, name), '--check']) == 0


def test_an_inserted_augmentation_is_one_difference(tmp_path):
    tree = tmp_path / 'd2'
    shutil.copytree(D2, tree)
    shutil.copytree(BACKBONE_FILES, tmp_path / '_base_')
    ours = tree / 'mask_rcnn_plainvit_s_100ep.py'
    ours.write_text(
        ours.read_text() + '\nimport detectron2.data.transforms as T\n'
        'from detectron2.config import LazyCall as L\n'
        'dataloader.train.mapper.augmentations.insert(1, L(T.RandomBrightness)(intensity_min=0.9, '
        'intensity_max=1.1))\n'
    )
    found = recipe_diff.compare(str(ours)).found
    assert [k for k in found if '.augmentations' in k] == ['dataloader.train.mapper.augmentations.RandomBrightness']


def test_a_target_flattens_to_its_qualified_name():
    from detectron2.modeling import ViT
    from torch import nn

    net = {'_target_': ViT, 'norm_layer': functools.partial(nn.LayerNorm, eps=1e-6), 'window_size': 14}
    assert recipe_diff.flatten({'net': net}) == {
        'net._target_': 'detectron2.modeling.backbone.vit.ViT',
        'net.norm_layer._target_': 'torch.nn.modules.normalization.LayerNorm',
        'net.norm_layer.eps': 1e-6,
        'net.window_size': 14,
    }


def test_lazy_configs_are_told_from_mmengine_configs():
    assert all(is_lazy_config(Path(p)) for p in RECIPES)
    assert is_lazy_config(recipe_diff.resolve(VITDET.format('cascade_mask_rcnn')))
    mm = osp.join(REPO, 'configs', 'det', '_base_', 'mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py')
    assert not is_lazy_config(Path(mm))
