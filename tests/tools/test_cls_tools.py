"""The tools on classification configs: tools/test.py's scopes, get_flops, visualize_depth, the default image
and the benchmark (training and evaluating a classifier end to end: tests/e2e/test_cls.py)."""

import os.path as osp
import sys

import pytest
import torch
from helpers import REPO

sys.path.insert(0, osp.join(REPO, 'tools'))
sys.path.insert(0, osp.join(REPO, 'tools', 'analysis_tools'))
import demo as demo_tool  # noqa: E402  (tools/demo.py)
import get_flops  # noqa: E402  (tools/analysis_tools/get_flops.py)
import test as test_tool  # noqa: E402  (tools/test.py)
import visualize_depth  # noqa: E402  (tools/analysis_tools/visualize_depth.py)

from mmrecvit.datasets import TOY_CLS_CLASSES  # noqa: E402


def test_test_tool_names_the_allowed_scopes(tmp_path):
    cfg = tmp_path / 'bad.py'
    cfg.write_text("default_scope = 'mmocr'\nmodel = dict(type='X')\n")
    with pytest.raises(SystemExit, match="'mmdet', 'mmseg', 'mmpretrain'"):
        test_tool.build_cfg(test_tool.parse_args([str(cfg), 'none.pth']))


# ---- the analysis tools on a classifier ----------------------------------------------------------
@pytest.fixture(scope='module')
def cls_image(toy_root):
    return str(toy_root / 'toy_cls' / 'val' / 'star' / 'val_000003.jpg')


@pytest.mark.usefixtures('one_thread')
def test_get_flops_counts_the_whole_classifier(cls_image, capsys):
    report = get_flops.main([demo_tool.toy_config('cls', 'morvit'), '--image', cls_image])
    assert report.model == 'ImageClassifier' and report.input_shape == (1, 3, 64, 64)  # the test pipeline
    bb = report.backbone
    assert bb.name == 'MoRViT' and bb.grid == (4, 4) and 0 < bb.flops < bb.dense_flops  # routed tokens
    assert set(report.rest) == {'head'} and report.rest['head'] == pytest.approx(2 * 192 * len(TOY_CLS_CLASSES))
    assert 'whole model (ImageClassifier)' in capsys.readouterr().out
    assert get_flops.main(
        [demo_tool.toy_config('cls', 'plainvit'), '--image', cls_image, '--shape', '96']
    ).input_shape == (1, 3, 96, 96)


@pytest.mark.usefixtures('one_thread')
def test_visualize_depth_draws_a_classifiers_routing(cls_image, tmp_path):
    pngs = visualize_depth.main(
        [demo_tool.toy_config('cls', 'edgerecvit'), 'none', cls_image, '--out-dir', str(tmp_path)]
    )
    assert pngs and all(p.suffix == '.png' and p.is_file() for p in pngs)
    assert any('depth' in p.name for p in pngs)


def test_default_image_of_the_classification_scope(toy_root):
    from mmrecvit.mm.tooling import default_image

    path = default_image('mmpretrain', data_root=toy_root)
    assert path.is_file() and path.parent.name == TOY_CLS_CLASSES[0]


@pytest.mark.usefixtures('one_thread')
def test_benchmark_builds_a_cls_config_backbone_and_whole_classifier():
    from mmrecvit.benchmark import parse_spec
    from mmrecvit.benchmark.build import build_model

    config = demo_tool.toy_config('cls', 'srvit')
    images = torch.randn(2, 3, 64, 64)
    whole = build_model(parse_spec(f'{config}(whole=True)'), (64, 64))
    logits = whole.run(whole.prepare(images))
    assert type(whole.module).__name__ == 'ImageClassifier' and logits.shape == (2, len(TOY_CLS_CLASSES))
    backbone = build_model(parse_spec(config), (64, 64))
    (cls_token,) = backbone.run(backbone.prepare(images))
    assert cls_token.shape == (2, 192) and backbone.flops() > 0
