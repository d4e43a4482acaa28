"""End to end through tools/: train, test, resume, 2 processes, inference APIs (issue 3)."""
import glob
import json
import os
import os.path as osp
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import REPO, toy_cfg_options

sys.path.insert(0, osp.join(REPO, 'tools'))
import demo as demo_tool  # noqa: E402  (tools/demo.py)
import test as test_tool  # noqa: E402  (tools/test.py)
import train as train_tool  # noqa: E402  (tools/train.py)

DET = osp.join(REPO, 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py')
SEG = osp.join(REPO, 'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py')

pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def det_run(toy_root, tmp_path_factory):
    work = tmp_path_factory.mktemp('det')
    train_tool.main([DET, *toy_cfg_options('det', toy_root, work)])
    return work


@pytest.fixture(scope='module')
def seg_run(toy_root, tmp_path_factory):
    work = tmp_path_factory.mktemp('seg')
    train_tool.main([SEG, *toy_cfg_options('seg', toy_root, work)])
    return work


def test_each_runner_draws_with_its_own_visualizer(toy_root, tmp_path):
    """A det run after a det and a cls run in one process draws with a det visualizer (the hooks take the
    current instance; the det one's reused name used to leave the cls one current)."""
    from mmdet.visualization import DetLocalVisualizer
    from mmengine.visualization import Visualizer

    from mmrecvit.mm import cli

    for i, (task, config) in enumerate([('det', DET), ('cls', demo_tool.toy_config('cls', 'plainvit')), ('det', DET)]):
        args = train_tool.parse_args([config, *toy_cfg_options(task, toy_root, tmp_path / str(i))])
        runner = cli.build_runner(cli.load_config(args), 'none', tool='test')
        assert Visualizer.get_current_instance() is runner.visualizer
    assert isinstance(runner.visualizer, DetLocalVisualizer)


def test_det_train_writes_checkpoint_and_evaluates(det_run, toy_root, tmp_path):
    ckpt = det_run / 'iter_2.pth'
    assert ckpt.is_file()
    metrics = test_tool.main([DET, str(ckpt), *toy_cfg_options('det', toy_root, tmp_path),
                              '--out', str(tmp_path / 'preds.pkl'), '--show-dir', 'vis'])
    assert {'coco/bbox_mAP', 'coco/segm_mAP'} <= set(metrics)
    assert (tmp_path / 'preds.pkl').is_file()
    assert glob.glob(str(tmp_path / '*' / 'vis' / '*.jpg')) + glob.glob(str(tmp_path / '*' / 'vis' / '*.png'))


def test_seg_train_writes_checkpoint_and_evaluates(seg_run, toy_root, tmp_path):
    ckpt = seg_run / 'iter_2.pth'
    assert ckpt.is_file()
    metrics = test_tool.main([SEG, str(ckpt), *toy_cfg_options('seg', toy_root, tmp_path)])
    assert {'mIoU', 'aAcc'} <= set(metrics)


def test_resume_continues_from_the_last_checkpoint(det_run, toy_root, tmp_path):
    work = tmp_path / 'work'
    shutil.copytree(det_run, work)  # keep det_run's iter_2.pth for the other tests
    before = torch.load(work / 'iter_2.pth', map_location='cpu')['state_dict']
    runner = train_tool.main([DET, '--resume', *toy_cfg_options('det', toy_root, work, iters=3)])
    assert runner.iter == 3
    after = torch.load(work / 'iter_3.pth', map_location='cpu')
    assert after['meta']['iter'] == 3
    # It continued from iteration 2's weights: one AdamW step moves them only a little.
    w0, w1 = before['backbone.blocks.0.mlp.fc1.weight'], after['state_dict']['backbone.blocks.0.mlp.fc1.weight']
    assert 0 < (w1 - w0).abs().max() < 0.01


def test_det_inference_apis(det_run, toy_root):
    from mmdet.apis import DetInferencer, inference_detector, init_detector

    image = sorted(glob.glob(f'{toy_root}/toy_coco/val2017/*.jpg'))[0]
    model = init_detector(DET, str(det_run / 'iter_2.pth'), device='cpu')
    result = inference_detector(model, image)
    assert result.pred_instances.bboxes.shape[1] == 4
    out = DetInferencer(model=DET, weights=str(det_run / 'iter_2.pth'), device='cpu', show_progress=False)(image)
    assert 'predictions' in out and len(out['predictions']) == 1


def test_seg_inference_apis(seg_run, toy_root):
    from mmseg.apis import MMSegInferencer, inference_model, init_model

    image = sorted(glob.glob(f'{toy_root}/toy_ade/ADEChallengeData2016/images/validation/*.jpg'))[0]
    model = init_model(SEG, str(seg_run / 'iter_2.pth'), device='cpu')
    result = inference_model(model, image)
    assert result.pred_sem_seg.data.shape[-2:] == (128, 128)
    out = MMSegInferencer(model=SEG, weights=str(seg_run / 'iter_2.pth'), device='cpu')(image)
    assert out['predictions'].shape == (128, 128)


def test_two_process_training_on_cpu(toy_root, tmp_path):
    """tools/dist_train.sh with 2 processes (gloo on CPU); both ranks end with identical weights."""
    env = {**os.environ, 'PYTHON': sys.executable, 'PORT': '29517', 'OMP_NUM_THREADS': '1'}
    cmd = ['bash', osp.join(REPO, 'tools/dist_train.sh'), SEG, '2',
           *toy_cfg_options('seg', toy_root, tmp_path, batch=1)]
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert 'Distributed training is not used' not in res.stdout + res.stderr
    assert (tmp_path / 'iter_2.pth').is_file()


def test_demo_trains_evaluates_and_draws_both_tasks(toy_root, tmp_path, capsys):
    """README command 1 end to end, shortened: train, evaluate untrained and trained, draw PNGs, report."""
    results = demo_tool.main(['--task', 'both', '--iters', '2', '--data-root', str(toy_root),
                              '--work-dir', str(tmp_path)])
    assert [r['task'] for r in results] == ['det', 'seg']
    for r, keys in zip(results, (['coco/bbox_mAP', 'coco/segm_mAP'], ['mIoU', 'aAcc'])):
        assert set(keys) <= set(r['untrained']) and set(keys) <= set(r['trained'])
        assert osp.isfile(r['checkpoint']) and r['checkpoint'].endswith('iter_2.pth')
        assert osp.isfile(osp.join(r['work_dir'], 'initial_weights.pth'))
        assert len(r['pngs']) == 4 and all(p.endswith('.png') and osp.isfile(p) for p in r['pngs'])
        with open(osp.join(r['work_dir'], 'scores.json')) as f:  # what gen_metafile --scores reads
            assert json.load(f) == json.loads(json.dumps(r))
        (train_log,) = glob.glob(osp.join(r['work_dir'], '2*', '2*.log'))  # the training run's log
        with open(train_log) as f:
            assert 'Saving checkpoint' in (text := f.read()) and 'Iter(val)' not in text  # evaluated once, after
    out = capsys.readouterr().out
    assert 'untrained' in out and 'bbox mAP' in out and 'mIoU' in out and 'total time' in out


@pytest.mark.parametrize('iters', [2, 40, 300])
def test_demo_iters_stretches_the_schedule_to_its_end(iters):
    """--iters N: the decay that ended at the config's last iteration ends at N (the warm-up stays)."""
    from mmengine.config import Config
    cfg = Config.fromfile(osp.join(REPO, 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py'))
    warmup, decay = (dict(p) for p in cfg.param_scheduler)
    demo_tool.stretch_schedule(cfg, iters)
    assert cfg.train_cfg.max_iters == iters
    assert dict(cfg.param_scheduler[0]) == warmup
    if iters > decay['begin']:
        assert cfg.param_scheduler[1]['end'] == iters
        assert cfg.param_scheduler[1]['T_max'] == iters - decay['begin']
    else:  # shorter than the warm-up: the decay phase never starts and is left as it was
        assert dict(cfg.param_scheduler[1]) == decay


@pytest.mark.parametrize('iters', ['0', '-3'])
def test_demo_refuses_a_non_positive_iters(iters, capsys):
    with pytest.raises(SystemExit):
        demo_tool.main(['--iters', iters])
    assert f'--iters must be >= 1 (training iterations), got {iters}' in capsys.readouterr().err


def test_demo_refuses_a_data_root_without_toy_sets(tmp_path):
    with pytest.raises(SystemExit, match='no toy set at toy_coco.*make_toy_data.py --out'):
        demo_tool.main(['--data-root', str(tmp_path), '--work-dir', str(tmp_path / 'w')])
