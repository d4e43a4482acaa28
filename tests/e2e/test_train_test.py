"""End to end through tools/ with the PlainViT toys: the demo (README command 1), tools/test.py (also --tta) on the
demo's checkpoints, --resume from them, the inference APIs. (scripts/gpu_check.sh's CPU dry mode:
tests/scripts/test_gpu_check.py.)"""

import glob
import json
import os.path as osp
import shutil
import sys

import pytest
import torch
from helpers import REPO, toy_cfg_options

sys.path.insert(0, osp.join(REPO, 'tools'))
import test as test_tool  # noqa: E402  (tools/test.py)
import train as train_tool  # noqa: E402  (tools/train.py)

DET = osp.join(REPO, 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py')
SEG = osp.join(REPO, 'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py')
CONFIGS = {'det': DET, 'seg': SEG}
METRICS = {'det': {'coco/bbox_mAP', 'coco/segm_mAP'}, 'seg': {'mIoU', 'aAcc'}}
pytestmark = pytest.mark.subprocess  # the shared runs come from `python tools/demo.py` (conftest.py)


def checkpoint(plainvit_toys, task):
    return str(plainvit_toys[task] / 'iter_2.pth')


def test_demo_trains_evaluates_and_draws_both_tasks(plainvit_toys):
    """README command 1 end to end, shortened (`--task both --iters 2`): train, evaluate untrained and trained,
    draw PNGs, report."""
    for task in ('det', 'seg'):
        work = plainvit_toys[task]
        r = json.loads((work / 'scores.json').read_text())  # what the demo returned; gen_metafile --scores reads it
        assert (r['task'], r['model'], r['iters']) == (task, 'plainvit', 2)
        assert METRICS[task] <= set(r['untrained']) and METRICS[task] <= set(r['trained'])
        assert osp.isfile(r['checkpoint']) and r['checkpoint'].endswith('iter_2.pth')
        assert osp.isfile(osp.join(r['work_dir'], 'initial_weights.pth'))
        assert len(r['pngs']) == 4 and all(p.endswith('.png') and osp.isfile(p) for p in r['pngs'])
        (train_log,) = glob.glob(osp.join(r['work_dir'], '2*', '2*.log'))  # the training run's log
        with open(train_log) as f:
            assert 'Saving checkpoint' in (text := f.read()) and 'Iter(val)' not in text  # evaluated once, after
    out = plainvit_toys['demo_log'].read_text()
    assert 'untrained' in out and 'bbox AP' in out and 'mIoU' in out and 'total time' in out


def test_det_checkpoint_evaluates_with_tools_test(plainvit_toys, toy_root, tmp_path):
    metrics = test_tool.main(
        [
            DET,
            checkpoint(plainvit_toys, 'det'),
            *toy_cfg_options('det', toy_root, tmp_path),
            '--out',
            str(tmp_path / 'preds.pkl'),
            '--show-dir',
            str(tmp_path / 'vis'),
        ]
    )
    assert METRICS['det'] <= set(metrics)
    assert (tmp_path / 'preds.pkl').is_file()
    assert len(glob.glob(str(tmp_path / 'vis' / '*.jpg'))) == 4  # every toy val image, in the folder named


def test_seg_checkpoint_evaluates_with_tools_test(plainvit_toys, toy_root, tmp_path):
    metrics = test_tool.main([SEG, checkpoint(plainvit_toys, 'seg'), *toy_cfg_options('seg', toy_root, tmp_path)])
    assert METRICS['seg'] <= set(metrics)


@pytest.mark.parametrize('task', ['det', 'seg'])
def test_tools_test_tta_end_to_end_on_two_images(plainvit_toys, toy_root, tmp_path, task):
    options = toy_cfg_options(task, toy_root, tmp_path)
    ckpt = checkpoint(plainvit_toys, task)
    metrics = test_tool.main([CONFIGS[task], ckpt, '--tta', *options, 'test_dataloader.dataset.indices=2'])
    assert METRICS[task] <= set(metrics)
    with pytest.raises(SystemExit, match='--tta needs tta_model'):
        test_tool.main([CONFIGS[task], ckpt, '--tta', *options, 'tta_model=None'])


def test_resume_continues_from_the_last_checkpoint(plainvit_toys, toy_root, tmp_path):
    work = tmp_path / 'work'
    shutil.copytree(plainvit_toys['det'], work)  # the demo's folder stays as it is for the other tests
    before = torch.load(work / 'iter_2.pth', map_location='cpu')['state_dict']
    runner = train_tool.main([DET, '--resume', *toy_cfg_options('det', toy_root, work, iters=3)])
    assert runner.iter == 3
    after = torch.load(work / 'iter_3.pth', map_location='cpu')
    assert after['meta']['iter'] == 3
    # It continued from iteration 2's weights: one AdamW step moves them only a little.
    w0, w1 = before['backbone.blocks.0.mlp.fc1.weight'], after['state_dict']['backbone.blocks.0.mlp.fc1.weight']
    assert 0 < (w1 - w0).abs().max() < 0.01


def test_det_inference_apis(plainvit_toys, toy_root):
    from mmdet.apis import DetInferencer, inference_detector, init_detector

    image = sorted(glob.glob(f'{toy_root}/toy_coco/val2017/*.jpg'))[0]
    model = init_detector(DET, checkpoint(plainvit_toys, 'det'), device='cpu')
    result = inference_detector(model, image)
    assert result.pred_instances.bboxes.shape[1] == 4
    out = DetInferencer(model=DET, weights=checkpoint(plainvit_toys, 'det'), device='cpu', show_progress=False)(image)
    assert 'predictions' in out and len(out['predictions']) == 1


def test_seg_inference_apis(plainvit_toys, toy_root):
    from mmseg.apis import MMSegInferencer, inference_model, init_model

    image = sorted(glob.glob(f'{toy_root}/toy_ade/ADEChallengeData2016/images/validation/*.jpg'))[0]
    model = init_model(SEG, checkpoint(plainvit_toys, 'seg'), device='cpu')
    result = inference_model(model, image)
    assert result.pred_sem_seg.data.shape[-2:] == (128, 128)
    out = MMSegInferencer(model=SEG, weights=checkpoint(plainvit_toys, 'seg'), device='cpu')(image)
    assert out['predictions'].shape == (128, 128)
