"""ViTDet's recipes have its relative position biases on (issue 28.2): every mm ViTDet config and every
detectron2 ViTDet config builds its backbone with `use_rel_pos=True`; the other recipes keep them off."""

import glob
import os.path as osp

import pytest
from helpers import REPO, cached_config

MM_VITDET = sorted(glob.glob(osp.join(REPO, 'configs/det/*vitdet*.py')))
D2_VITDET = sorted(glob.glob(osp.join(REPO, 'configs/d2/*_100ep.py')))
MM_OTHER = sorted(set(glob.glob(osp.join(REPO, 'configs/det/*.py'))) - set(MM_VITDET))


def test_there_are_vitdet_recipes():
    assert len(MM_VITDET) >= 12 and len(D2_VITDET) >= 12


@pytest.mark.parametrize('path', MM_VITDET, ids=osp.basename)
def test_mm_vitdet_recipes_use_rel_pos(path):
    assert cached_config(path).model.backbone.get('use_rel_pos') is True


@pytest.mark.parametrize('path', MM_OTHER, ids=osp.basename)
def test_other_det_recipes_do_not(path):
    assert not cached_config(path).model.backbone.get('use_rel_pos', False)


@pytest.mark.parametrize('path', D2_VITDET, ids=osp.basename)
def test_d2_vitdet_recipes_use_rel_pos(path):
    LazyConfig = pytest.importorskip('detectron2.config').LazyConfig
    assert LazyConfig.load(path).model.backbone.net.use_rel_pos is True
