"""Classification end to end through tools/: every method trains on the toy classification set with its
auxiliary losses in the log, tools/test.py evaluates a checkpoint, the analysis tools take a cls config,
and the transfer demo pretrains a classifier and starts the toy Mask R-CNN from it."""
import glob
import json
import os.path as osp
import pickle
import sys

import pytest
import torch
from conftest import REPO, toy_cfg_options

sys.path.insert(0, osp.join(REPO, 'tools'))
sys.path.insert(0, osp.join(REPO, 'tools', 'analysis_tools'))
import demo as demo_tool  # noqa: E402  (tools/demo.py)
import get_flops  # noqa: E402  (tools/analysis_tools/get_flops.py)
import test as test_tool  # noqa: E402  (tools/test.py)
import train as train_tool  # noqa: E402  (tools/train.py)
import visualize_depth  # noqa: E402  (tools/analysis_tools/visualize_depth.py)

from mmrecvit.datasets import TOY_CLS_CLASSES  # noqa: E402

# What each method adds to the training log through RecursionHook: its auxiliary losses (summed into the
# total loss), or, for the methods without any, a statistic it reports.
LOGGED = {
    'plainvit': [],
    'naiverecvit': [],
    'srvit': ['recursions/u0'],                                   # mixture statistics, no aux loss
    'revit': ['loss_revit_balance', 'loss_revit_z', 'loss_revit_diversity'],  # E = 4 > 1
    'edgerecvit': ['loss_stb', 'loss_du'],
    'morvit': ['loss_router_bce'],                                # expert-choice routing
}


def train_log(work_dir) -> str:
    (log,) = glob.glob(osp.join(work_dir, '2*', '2*.log'))  # the run's log file (work_dir/<timestamp>/)
    with open(log) as f:
        return f.read()


@pytest.fixture(scope='module')
def cls_run(toy_root, tmp_path_factory):
    """The toy PlainViT classifier after 2 iterations (its checkpoint is shared by the tests below)."""
    work = tmp_path_factory.mktemp('cls')
    train_tool.main([demo_tool.toy_config('cls', 'plainvit'), *toy_cfg_options('cls', toy_root, work)])
    return work


@pytest.mark.slow
@pytest.mark.parametrize('method', sorted(LOGGED))
def test_every_method_trains_with_its_aux_losses_in_the_log(method, toy_root, tmp_path):
    runner = train_tool.main([demo_tool.toy_config('cls', method), *toy_cfg_options('cls', toy_root, tmp_path)])
    assert runner.iter == 2 and (tmp_path / 'iter_2.pth').is_file()
    text = train_log(tmp_path)
    (last,) = [line for line in text.splitlines() if 'Iter(train) [2/2]' in line]
    for name in ['loss', *LOGGED[method]]:
        assert f' {name}: ' in last, f'{name} missing from: {last}'
    assert 'accuracy/top1' in text  # validated after the last iteration


@pytest.mark.slow
def test_test_tool_prints_accuracy_and_writes_predictions_and_drawings(cls_run, toy_root, tmp_path):
    metrics = test_tool.main([demo_tool.toy_config('cls', 'plainvit'), str(cls_run / 'iter_2.pth'),
                              *toy_cfg_options('cls', toy_root, tmp_path), '--out', str(tmp_path / 'preds.pkl'),
                              '--show-dir', str(tmp_path / 'vis')])
    assert set(metrics) == {'accuracy/top1'} and 0 <= metrics['accuracy/top1'] <= 100
    assert 'accuracy/top1' in train_log(tmp_path)
    with open(tmp_path / 'preds.pkl', 'rb') as f:
        preds = pickle.load(f)  # mmengine's DumpResults
    assert len(preds) == 5 and preds[0]['pred_score'].shape == (len(TOY_CLS_CLASSES),)
    assert len(glob.glob(str(tmp_path / 'vis' / '*.png'))) == 5  # mmpretrain's hook: into --show-dir itself
    with pytest.raises(SystemExit, match='.pkl'):
        test_tool.main([demo_tool.toy_config('cls', 'plainvit'), str(cls_run / 'iter_2.pth'), '--out', 'x.json'])


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
    assert get_flops.main([demo_tool.toy_config('cls', 'plainvit'), '--image', cls_image, '--shape', '96']
                          ).input_shape == (1, 3, 96, 96)


@pytest.mark.usefixtures('one_thread')
def test_visualize_depth_draws_a_classifiers_routing(cls_image, tmp_path):
    pngs = visualize_depth.main([demo_tool.toy_config('cls', 'edgerecvit'), 'none', cls_image,
                                 '--out-dir', str(tmp_path)])
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


# ---- the transfer demo ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_transfer_demo_pretrains_then_detects_from_the_classifier(toy_root, tmp_path, capsys):
    results = demo_tool.main(['--task', 'transfer', '--model', 'morvit', '--iters', '2', '--data-root', str(toy_root),
                              '--work-dir', str(tmp_path)])
    pretrain, det = results
    assert (pretrain['task'], det['task']) == ('cls', 'det')
    assert 'accuracy/top1' in pretrain['trained'] and 'coco/bbox_mAP' in det['trained']
    assert det['backbone_checkpoint'] == pretrain['checkpoint'] and osp.isfile(pretrain['checkpoint'])
    assert len(pretrain['pngs']) == 4 and len(det['pngs']) == 4
    work = tmp_path / 'transfer_morvit'
    with open(work / 'scores.json') as f:  # both runs, as returned
        assert json.load(f) == json.loads(json.dumps(dict(task='transfer', model='morvit', pretrain=pretrain,
                                                           det=det)))
    # the detector's backbone started from the classifier: its head and final norm dropped and logged
    text = train_log(work / 'det')
    assert pretrain['checkpoint'] in text and "['head']" in text and 'norm.weight' in text
    init = torch.load(work / 'det' / 'initial_weights.pth', weights_only=False)['state_dict']
    cls = torch.load(pretrain['checkpoint'], weights_only=False)['state_dict']
    for key in ('backbone.blocks.1.mlp.fc1.weight', 'backbone.routers.0.weight', 'backbone.patch_embed.proj.weight'):
        assert torch.equal(init[key], cls[key]), key
    out = capsys.readouterr().out
    assert 'top-1 %' in out and 'bbox mAP' in out and 'backbone started from' in out
