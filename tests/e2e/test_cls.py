"""Classification end to end through tools/: every method trains on the toy classification set with its
auxiliary losses in the log, tools/test.py evaluates a checkpoint, and the transfer demo pretrains a classifier
and starts the toy Mask R-CNN from it."""

import glob
import json
import os.path as osp
import pickle
import sys
from pathlib import Path

import pytest
import torch
from helpers import REPO, toy_cfg_options

sys.path.insert(0, osp.join(REPO, 'tools'))
sys.path.insert(0, osp.join(REPO, 'tools', 'analysis_tools'))
import demo as demo_tool  # noqa: E402  (tools/demo.py)
import test as test_tool  # noqa: E402  (tools/test.py)

from mmrecvit.datasets import TOY_CLS_CLASSES  # noqa: E402
from mmrecvit.mm.start_meta import read_start_meta  # noqa: E402

# What each method adds to the training log through RecursionHook: its auxiliary losses (summed into the
# total loss), or, for the methods without any, a statistic it reports.
LOGGED = {
    'plainvit': [],
    'naiverecvit': [],
    'srvit': ['recursions/u0'],  # mixture statistics, no aux loss
    'revit': ['loss_revit_balance', 'loss_revit_z', 'loss_revit_diversity'],  # E = 4 > 1
    'edgerecvit': ['loss_stb', 'loss_du'],
    'morvit': ['loss_router_bce'],  # expert-choice routing
}


def train_log(work_dir) -> str:
    (log,) = glob.glob(osp.join(work_dir, '2*', '2*.log'))  # the run's log file (work_dir/<timestamp>/)
    with open(log) as f:
        return f.read()


@pytest.mark.parametrize('method', sorted(LOGGED))
def test_every_method_trains_with_its_aux_losses_in_the_log(method, cls_runs):
    work = cls_runs(method)
    assert (work / 'iter_2.pth').is_file()
    text = train_log(work)
    (last,) = [line for line in text.splitlines() if 'Iter(train) [2/2]' in line]
    for name in ['loss', *LOGGED[method]]:
        assert f' {name}: ' in last, f'{name} missing from: {last}'
    assert 'accuracy/top1' in text  # validated after the last iteration
    # issue 45: the top-1 of that last validation is in the last checkpoint's meta (StartMetaHook), a start's quality
    meta = read_start_meta(str(work / 'iter_2.pth'))
    assert 0 <= meta['imagenet_top1'] <= 100 and meta['val_images'] > 0 and meta['config'].endswith('_toy-cls.py')
    assert ('gumbel_tau' in meta) == (method == 'edgerecvit')  # TemperatureScheduleHook's, at every save


def test_test_tool_prints_accuracy_and_writes_predictions_and_drawings(cls_runs, toy_root, tmp_path):
    cls_run = cls_runs('plainvit')
    metrics = test_tool.main(
        [
            demo_tool.toy_config('cls', 'plainvit'),
            str(cls_run / 'iter_2.pth'),
            *toy_cfg_options('cls', toy_root, tmp_path),
            '--out',
            str(tmp_path / 'preds.pkl'),
            '--show-dir',
            str(tmp_path / 'vis'),
        ]
    )
    assert set(metrics) == {'accuracy/top1'} and 0 <= metrics['accuracy/top1'] <= 100
    assert 'accuracy/top1' in train_log(tmp_path)
    with open(tmp_path / 'preds.pkl', 'rb') as f:
        preds = pickle.load(f)  # mmengine's DumpResults
    assert len(preds) == 5 and preds[0]['pred_score'].shape == (len(TOY_CLS_CLASSES),)
    assert len(glob.glob(str(tmp_path / 'vis' / '*.png'))) == 5  # mmpretrain's hook: into --show-dir itself
    with pytest.raises(SystemExit, match='.pkl'):
        test_tool.main([demo_tool.toy_config('cls', 'plainvit'), str(cls_run / 'iter_2.pth'), '--out', 'x.json'])


# ---- the transfer demo ---------------------------------------------------------------------------------
def test_transfer_demo_pretrains_then_detects_from_the_classifier(transfer_demo):
    pretrain, det = transfer_demo['results']
    assert (pretrain['task'], det['task']) == ('cls', 'det')
    assert 'accuracy/top1' in pretrain['trained'] and 'coco/bbox_mAP' in det['trained']
    assert det['backbone_checkpoint'] == pretrain['checkpoint'] and osp.isfile(pretrain['checkpoint'])
    assert len(pretrain['pngs']) == 4 and len(det['pngs']) == 4
    work = Path(transfer_demo['work'])
    with open(work / 'scores.json') as f:  # both runs, as returned
        assert json.load(f) == json.loads(json.dumps(dict(task='transfer', model='morvit', pretrain=pretrain, det=det)))
    # the detector's backbone started from the classifier: its head and final norm dropped and logged
    text = train_log(work / 'det')
    assert pretrain['checkpoint'] in text and "['head']" in text and 'norm.weight' in text
    init = torch.load(work / 'det' / 'initial_weights.pth', weights_only=False)['state_dict']
    cls = torch.load(pretrain['checkpoint'], weights_only=False)['state_dict']
    for key in ('backbone.blocks.1.mlp.fc1.weight', 'backbone.routers.0.weight', 'backbone.patch_embed.proj.weight'):
        assert torch.equal(init[key], cls[key]), key
    out = transfer_demo['output']
    assert 'top-1 %' in out and 'bbox AP' in out and 'backbone started from' in out
