"""The main demo (README command 1): toy data -> train (CPU, or the GPU when one is visible) -> evaluate -> trained
vs untrained.

    python tools/demo.py                              # toy Mask R-CNN with PlainViT (make demo)
    python tools/demo.py --model srvit --task seg     # toy UperNet with SR-ViT
    python tools/demo.py --task both                  # det and seg
    python tools/demo.py --model morvit --task cls    # toy image classifier (mmpretrain)
    python tools/demo.py --model morvit --task transfer   # pretrain on toy cls, then the toy Mask R-CNN from it

For each task it (1) writes the embedded toy datasets if `data/` lacks them, (2) trains the toy
config through mmengine's Runner, saving the exact initial weights before the first iteration,
(3) evaluates the initial and the trained weights with the task's real metric (mmdet's
`CocoMetric` bbox/segm mAP, mmseg's `IoUMetric` mIoU, mmpretrain's `Accuracy` top-1), and (4)
draws a few predictions of the trained model with mmdet's `DetInferencer` / mmseg's
`MMSegInferencer` / mmpretrain's `ImageClassificationInferencer` into PNG files.

`--task transfer` is the path from classification pretraining to a dense task: the toy classifier
of the method is trained (as `--task cls`), then the toy Mask R-CNN of the same method starts from
its checkpoint: the backbone's `init_cfg` loads it through the backbone's own filter, which drops
the classifier head and the final norm (a dense backbone has none) and logs what it dropped. The
detector's "untrained" weights are then the pretrained backbone with fresh neck and heads; its
`scores.json` holds both runs.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import os.path as osp
import time

import mmrecvit.mm  # noqa: F401  (first: compat fixes + registration before mmdet/mmpretrain import; mmcv-lite's ops)

# isort: split
import mmcv
import torch
from mmdet.apis import DetInferencer
from mmengine.config import Config
from mmengine.device import get_device
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmpretrain.apis import ImageClassificationInferencer
from mmseg.apis import MMSegInferencer

from mmrecvit.datasets import TOY_ADE_DIR, TOY_CLS_DIR, TOY_COCO_DIR, make_toy_data, toy_data_cfg
from mmrecvit.mm import cli
from mmrecvit.mm.checkpoint import check_checkpoint_matches_model
from mmrecvit.mm.tooling import in_percent

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DEFAULT_DATA_ROOT = osp.join(ROOT, 'data')
CONFIGS = {
    'det': 'configs/det/mask-rcnn_{model}-ti_fpn_1xb2-800it_toy-coco.py',
    'seg': 'configs/seg/upernet_{model}-ti_1xb4-150it_toy-ade20k-256x256.py',
    'cls': 'configs/cls/{model}-ti_1xb32-200it_toy-cls.py',
}
METRICS = {
    'det': [('bbox AP', 'coco/bbox_mAP'), ('segm AP', 'coco/segm_mAP')],
    'seg': [('mIoU', 'mIoU'), ('aAcc', 'aAcc')],
    'cls': [('top-1 %', 'accuracy/top1')],
}
TOY_DIRS = {'det': TOY_COCO_DIR, 'seg': TOY_ADE_DIR, 'cls': TOY_CLS_DIR}
# The tasks each --task runs (transfer: the classifier, then the detector started from it).
TASK_CHOICES = {'det': ['det'], 'seg': ['seg'], 'cls': ['cls'], 'both': ['det', 'seg'], 'transfer': ['cls', 'det']}


class SaveInitialWeights(Hook):
    """Save the weights the training starts from (after init, before the first iteration)."""

    priority = 'VERY_LOW'

    def __init__(self, path: str) -> None:
        self.path = path

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        torch.save({'state_dict': model.state_dict(), 'meta': {'note': 'initial weights (untrained)'}}, self.path)


def available_models(task: str) -> list[str]:
    pattern = osp.join(ROOT, CONFIGS[task].format(model='*'))
    prefix, suffix = pattern.split('*')
    return sorted(p[len(prefix) : -len(suffix)] for p in glob.glob(pattern))


def evaluate(cfg: Config, checkpoint: str, work_dir: str) -> dict:
    cfg = cfg.copy()
    cfg.load_from = checkpoint
    cfg.work_dir = work_dir
    runner = cli.build_runner(cfg, 'none', tool='demo.py')
    metrics = runner.test()
    cli.release_workers(runner)  # before the next Runner: not 5 s per worker when garbage-collected
    return {k: float(v) for k, v in metrics.items()}  # numpy scalars (mmseg's IoUMetric) -> JSON-able floats


def build_inferencer(task: str, config: str, checkpoint: str):
    """The framework's inferencer with `checkpoint`, which must be a checkpoint of this very model:
    a bad file stops in the loader (`mmrecvit.mm.compat` fix 3), another model's, which the inferencers
    load non-strictly with a warning, here (`check_checkpoint_matches_model`)."""
    device = get_device()  # where the Runner trained and evaluated: the GPU when one is visible
    if task == 'det':
        inferencer = DetInferencer(model=config, weights=checkpoint, device=device, show_progress=False)
    elif task == 'seg':
        inferencer = MMSegInferencer(model=config, weights=checkpoint, device=device)
    else:
        inferencer = ImageClassificationInferencer(model=config, pretrained=checkpoint, device=device)
    check_checkpoint_matches_model(inferencer.model, checkpoint, strict=True)
    return inferencer


def draw_predictions(task: str, config: str, checkpoint: str, images: list[str], out_dir: str) -> list[str]:
    inferencer = build_inferencer(task, config, checkpoint)
    if task == 'det':
        inferencer(images, out_dir=out_dir, pred_score_thr=0.5, no_save_pred=True)
    elif task == 'seg':
        inferencer(images, out_dir=out_dir, opacity=0.6)
    else:
        os.makedirs(osp.join(out_dir, 'vis'), exist_ok=True)
        inferencer(images, show_dir=osp.join(out_dir, 'vis'), resize=256)  # 64 px crops: drawn larger
    return as_png(sorted(glob.glob(osp.join(out_dir, 'vis', '*'))))


def val_images(task: str, data_root: str, num: int = 4) -> list[str]:
    """The first `num` val images of the task's toy set (for cls: of `num` different classes, whose
    images alternate by index)."""
    val_dir = {
        'det': osp.join(data_root, TOY_COCO_DIR, 'val2017', '*.jpg'),
        'seg': osp.join(data_root, TOY_ADE_DIR, 'images', 'validation', '*.jpg'),
        'cls': osp.join(data_root, TOY_CLS_DIR, 'val', '*', '*.jpg'),
    }[task]
    return sorted(glob.glob(val_dir), key=osp.basename)[:num]


def as_png(paths: list[str]) -> list[str]:
    """The inferencers name drawings after their inputs (.jpg here): store them as lossless PNGs."""
    pngs = []
    for path in paths:
        png = osp.splitext(path)[0] + '.png'
        if path != png:
            mmcv.imwrite(mmcv.imread(path), png)
            os.remove(path)
        pngs.append(png)
    return pngs


def stretch_schedule(cfg: Config, iters: int) -> None:
    """Train for `iters` iterations: the schedule phases that end at the config's last iteration
    (e.g. the cosine decay after the warm-up) are stretched or shortened to end at `iters`, and the
    log shows at least 10 training iterations of a short run (every iteration of one under 10)."""
    old = cfg.train_cfg.max_iters
    for phase in cfg.get('param_scheduler', None) or []:
        begin = phase.get('begin', 0)
        if phase.get('by_epoch', True) or phase.get('end') != old or begin >= iters:
            continue
        phase['end'] = iters
        if phase.get('T_max') == old - begin:
            phase['T_max'] = iters - begin
    cfg.train_cfg.max_iters = iters
    logger = cfg.get('default_hooks', {}).get('logger')
    if logger is not None:
        logger['interval'] = min(logger.get('interval', 10), max(1, iters // 10))


def toy_config(task: str, model: str) -> str:
    config = osp.join(ROOT, CONFIGS[task].format(model=model))
    if not osp.isfile(config):
        raise SystemExit(f'--model {model!r} has no {task} toy config ({config}); available: {available_models(task)}')
    return config


def run_task(
    task: str, model: str, work_dir: str, data_root: str, iters: int | None, backbone_checkpoint: str | None = None
) -> dict:
    """Train the toy config of `task` and `model` in `work_dir`, evaluate, draw; `backbone_checkpoint`:
    the backbone starts from it (its `init_cfg`) instead of the config's start."""
    config = toy_config(task, model)
    cfg = Config.fromfile(config)
    if osp.abspath(data_root) != osp.abspath(DEFAULT_DATA_ROOT):
        cfg.merge_from_dict(toy_data_cfg(task, data_root))
    if backbone_checkpoint is not None:
        cfg.model.backbone.init_cfg = dict(type='Pretrained', checkpoint=backbone_checkpoint)
    cfg.work_dir = work_dir
    if iters is not None:
        stretch_schedule(cfg, iters)
    cfg.default_hooks.checkpoint.interval = cfg.train_cfg.max_iters
    os.makedirs(work_dir, exist_ok=True)
    init_ckpt = osp.join(work_dir, 'initial_weights.pth')

    where = 'the GPU' if get_device() == 'cuda' else f'{torch.get_num_threads()} CPU threads'
    print(
        f'\n=== [{task}] training {osp.relpath(config, ROOT)} for {cfg.train_cfg.max_iters} iterations on {where} ===',
        flush=True,
    )
    t0 = time.time()
    # No validation during training (mmengine's loop would validate after the last iteration
    # whatever val_interval says): both weights are evaluated below, once each, through `test`.
    fit_cfg = cfg.copy()
    fit_cfg.val_dataloader = fit_cfg.val_cfg = fit_cfg.val_evaluator = None
    runner = cli.build_runner(fit_cfg, 'none', tool='demo.py')  # its log as tools/train.py's (mm/logs.py)
    runner.register_hook(SaveInitialWeights(init_ckpt))
    runner.train()
    cli.release_workers(runner)
    train_s = time.time() - t0
    trained_ckpt = osp.join(work_dir, f'iter_{cfg.train_cfg.max_iters}.pth')

    print(f'\n=== [{task}] evaluating the untrained and the trained weights ===', flush=True)
    t1 = time.time()
    untrained = evaluate(cfg, init_ckpt, osp.join(work_dir, 'eval_untrained'))
    trained = evaluate(cfg, trained_ckpt, osp.join(work_dir, 'eval_trained'))
    eval_s = time.time() - t1

    pngs = draw_predictions(task, config, trained_ckpt, val_images(task, data_root), osp.join(work_dir, 'predictions'))
    result = dict(
        task=task,
        model=model,
        config=osp.relpath(config, ROOT),
        iters=cfg.train_cfg.max_iters,
        threads=torch.get_num_threads(),
        untrained=untrained,
        trained=trained,
        train_s=train_s,
        eval_s=eval_s,
        work_dir=work_dir,
        checkpoint=trained_ckpt,
        pngs=pngs,
        log_dir=runner.log_dir,
        backbone_checkpoint=backbone_checkpoint,
    )
    write_scores(work_dir, result)
    return result


def write_scores(work_dir: str, result: dict) -> None:
    with open(osp.join(work_dir, 'scores.json'), 'w') as f:  # read by tools/misc/gen_metafile.py --scores
        json.dump(result, f, indent=2)


def run_transfer(model: str, work_root: str, data_root: str, iters: int | None) -> list[dict]:
    """The toy classifier of `model`, then its toy Mask R-CNN started from the classifier's checkpoint.

    Both runs live under `<work_root>/transfer_<model>/` (`pretrain/`, `det/`, each with its
    scores.json); the folder's own scores.json holds both."""
    toy_config('det', model)  # both configs must exist before the first one trains
    work_dir = osp.join(work_root, f'transfer_{model}')
    pretrain = run_task('cls', model, osp.join(work_dir, 'pretrain'), data_root, iters)
    det = run_task(
        'det', model, osp.join(work_dir, 'det'), data_root, iters, backbone_checkpoint=pretrain['checkpoint']
    )
    write_scores(work_dir, dict(task='transfer', model=model, pretrain=pretrain, det=det))
    return [pretrain, det]


def report(results: list[dict], total_s: float) -> None:
    print('\n' + '=' * 78)
    for r in results:
        print(f'[{r["task"]}] {r["model"]}: trained {r["train_s"] / 60:.1f} min, evaluated {r["eval_s"] / 60:.1f} min')
        if r.get('backbone_checkpoint'):
            print(f'  backbone started from {r["backbone_checkpoint"]} ("untrained": that backbone, fresh heads)')
        print(f'  {"metric (%)":<10} {"untrained":>10} {"trained":>10}')
        untrained, trained = in_percent(r['untrained']), in_percent(r['trained'])  # 54.0 AP, not 0.540
        for name, key in METRICS[r['task']]:
            before, after = untrained.get(key, float('nan')), trained.get(key, float('nan'))
            print(f'  {name:<10} {before:>10.1f} {after:>10.1f}')
        print(f'  checkpoint : {r["checkpoint"]}')
        print(f'  logs       : {r["log_dir"]}')
        print(f'  pictures   : {osp.dirname(r["pngs"][0]) if r["pngs"] else "(none)"} ({len(r["pngs"])} PNG)')
    print(f'total time: {total_s / 60:.1f} min')
    print('=' * 78)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--model', default='plainvit', help='backbone family of the toy configs, e.g. plainvit, srvit')
    parser.add_argument(
        '--task',
        choices=list(TASK_CHOICES),
        default='det',
        help='det, seg, both (det and seg), cls, or transfer (cls pretraining, then det from it)',
    )
    parser.add_argument('--work-dir', default='work_dirs/demo')
    parser.add_argument('--iters', type=int, default=None, help='override the number of training iterations')
    parser.add_argument(
        '--data-root',
        default=DEFAULT_DATA_ROOT,
        help='toy data folder (default: data/ of the repository, written when absent or outdated); '
        'another folder must already hold toy sets, e.g. from tools/misc/make_toy_data.py --out DIR',
    )
    args = parser.parse_args(argv)
    if args.iters is not None and args.iters < 1:
        parser.error(f'--iters must be >= 1 (training iterations), got {args.iters}')
    start = time.time()
    work_dir, data_root = osp.abspath(args.work_dir), osp.abspath(args.data_root)
    os.chdir(ROOT)  # the toy configs' data roots (data/toy_coco, data/toy_ade) are relative to the repo
    tasks = TASK_CHOICES[args.task]
    if data_root == osp.abspath(DEFAULT_DATA_ROOT):
        make_toy_data(DEFAULT_DATA_ROOT)
    else:
        missing = [TOY_DIRS[t] for t in tasks if not osp.isdir(osp.join(data_root, TOY_DIRS[t]))]
        if missing:
            raise SystemExit(
                f'--data-root {args.data_root}: no toy set at {", ".join(missing)}; write one with '
                f'python tools/misc/make_toy_data.py --out {args.data_root}'
            )
    if args.task == 'transfer':
        results = run_transfer(args.model, work_dir, data_root, args.iters)
    else:
        results = [
            run_task(t, args.model, osp.join(work_dir, f'{t}_{args.model}'), data_root, args.iters) for t in tasks
        ]
    report(results, time.time() - start)
    return results


if __name__ == '__main__':
    main()
