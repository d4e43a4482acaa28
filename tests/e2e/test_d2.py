"""detectron2 end to end: every method's toy Mask R-CNN and the Cascade toy train 2 iterations and
COCOEvaluator scores them (mmrecvit.d2.train.do_train); tools/d2_train_net.py trains and evaluates from the
command line, gives the in-process run's losses (the toy is seeded) and loads its checkpoint for --eval-only."""

import json
import sys
from pathlib import Path

import pytest
from helpers import D2_TOY, REPO, check_coco_scored, d2_toy_overrides, run

METHODS = ['plainvit', 'naiverecvit', 'srvit', 'revit', 'edgerecvit', 'morvit']


def losses(out):
    return [
        json.loads(line)['total_loss']
        for line in (out / 'metrics.json').read_text().splitlines()
        if 'total_loss' in line
    ]


@pytest.mark.parametrize('method', METHODS)
def test_toy_mask_rcnn_trains_and_cocoevaluator_scores_it(method, d2_toys):
    run = d2_toys(method)
    check_coco_scored(run['results'])
    out = Path(run['out'])
    metrics = [json.loads(line) for line in (out / 'metrics.json').read_text().splitlines()]
    assert [m['iteration'] for m in metrics if 'total_loss' in m] == [0, 1]
    assert (out / 'model_final.pth').is_file()


def test_the_cascade_toy_trains_its_three_stages_and_cocoevaluator_scores_it(d2_toys):
    run = d2_toys('plainvit', config=f'{REPO}/configs/d2/toy/cascade_mask_rcnn_plainvit_ti_toy_coco.py')
    check_coco_scored(run['results'])
    metrics = [json.loads(line) for line in (Path(run['out']) / 'metrics.json').read_text().splitlines()]
    first = next(m for m in metrics if 'total_loss' in m)
    assert {f'loss_box_reg_stage{i}' for i in range(3)} <= set(first) and 'loss_mask' in first


@pytest.mark.subprocess
def test_the_entry_point_trains_evaluates_and_reloads_as_in_process(d2_toys, toy_root, tmp_path):
    """The command line gives the in-process run's losses (both seeded alike: an unseeded toy differs by ~6 AP
    between runs), and its checkpoint is detectron2's, loaded back for --eval-only."""
    env = {'OMP_NUM_THREADS': '1', 'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path)}
    command = [sys.executable, 'tools/d2_train_net.py', '--config-file', D2_TOY.format('plainvit')]
    res = run([*command, *d2_toy_overrides(toy_root, tmp_path)], env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    check_coco_scored(json.loads((tmp_path / 'eval.json').read_text()))
    in_process = losses(Path(d2_toys('plainvit')['out']))
    assert len(in_process) == 2 and losses(tmp_path) == in_process
    res = run(
        [
            *command,
            '--eval-only',
            *d2_toy_overrides(toy_root, tmp_path / 'eval'),
            f'train.init_checkpoint={tmp_path}/model_final.pth',
        ],
        env=env,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    check_coco_scored(json.loads((tmp_path / 'eval' / 'eval.json').read_text()))
