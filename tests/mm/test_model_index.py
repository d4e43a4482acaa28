"""Our recipe names where mmdet's and mmseg's names work (issue 46.7; mmrecvit/mm/model_index.py): the inferencers
build a recipe of ours by its model-index name, their own package's names still resolve as before, and a name in
neither index is mmengine's error with the closest of ours."""

import os.path as osp
from types import SimpleNamespace

import pytest
import yaml
from helpers import REPO
from mmengine.infer import BaseInferencer

from mmrecvit.mm import model_index

pytestmark = pytest.mark.usefixtures('one_thread', 'this_checkout')
DET = 'mask-rcnn_revit-ti_fpn_1xb2-800it_toy-coco'
SEG = 'upernet_morvit-ti_1xb4-150it_toy-ade20k-256x256'


@pytest.fixture
def this_checkout(monkeypatch):
    """The configs and index of the checkout under test (the installed package may be another checkout's)."""
    monkeypatch.setattr(model_index, 'configs_root', lambda: osp.join(REPO, 'configs'))


def test_the_index_is_mims_layout_and_names_every_recipe_config():
    assert model_index.index_root() == REPO  # beside configs/, as mmdet's index sits beside its configs
    with open(osp.join(REPO, 'model-index.yml')) as f:
        assert yaml.safe_load(f) == {'Import': ['metafile.yml']}
    det, seg = model_index.recipes('mmdet'), model_index.recipes('mmseg')
    assert det and seg and not set(det) & set(seg)
    assert all(osp.isfile(p) and '/configs/det/' in p for p in det.values())
    assert all(osp.isfile(p) and '/configs/seg/' in p for p in seg.values())


def test_the_inferencers_build_our_recipes_by_name():
    from mmdet.apis import DetInferencer
    from mmseg.apis import MMSegInferencer

    with pytest.warns(UserWarning, match='randomly initialized'):  # no weights published: mmengine says so
        det = DetInferencer(model=DET, device='cpu', show_progress=False)
    assert type(det.model.backbone).__name__ == 'ReViT' and det.cfg.filename.endswith(f'configs/det/{DET}.py')
    seg = MMSegInferencer(model=SEG, device='cpu')
    assert type(seg.model.backbone).__name__ == 'MoRViT'


def test_their_own_names_still_resolve_and_an_unknown_one_names_our_closest():
    mmdet = SimpleNamespace(scope='mmdet')
    cfg, weights = BaseInferencer._load_model_from_metafile(mmdet, 'rtmdet_tiny_8xb32-300e_coco')  # mmdet's index
    assert cfg.model.type == 'RTMDet' and weights.startswith('https://download.openmmlab.com/')
    with pytest.raises(ValueError, match=f"Cannot find model: {DET[:-1]} in mmdet; nor among mmrecvit's mmdet recipes"):
        BaseInferencer._load_model_from_metafile(mmdet, DET[:-1])
    with pytest.raises(ValueError, match=f"closest: '{SEG}'"):
        BaseInferencer._load_model_from_metafile(SimpleNamespace(scope='mmseg'), SEG.replace('ti', 'tt'))
