"""The toy Mask R-CNN and a toy Cascade Mask R-CNN trained and evaluated with one backend of mmcv's ops: the
torchvision table mmcv-lite gets (mmrecvit/mm/mmcv_ext.py) or mmcv's compiled `_ext` (docs/install.md, "Does the
backend change the scores?"). Each run appends one JSON line to --out: backend, model, scores, the logged losses.

    python scripts/compare_mmcv_backends.py --backend table --model det --out work_dirs/mmcv_backends.jsonl
    python scripts/compare_mmcv_backends.py --backend compiled --model cascade --out work_dirs/mmcv_backends.jsonl

`table` uses the table even where a compiled mmcv is installed; `compiled` uses the installed full mmcv, else the
compiled `_ext` of the cached mmcv 2.1.0 wheel (as tests/mm/test_mmcv_ops.py loads it). The toy Cascade is the toy
Mask R-CNN (same backbone, neck, RPN, data and schedule) with mmdet's three cascade stages (cascade-mask-rcnn_r50_fpn)
at the toy heads' width. The toy sets are written to --data-root when missing (tools/demo.py's defaults).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import os.path as osp
import sys
import time

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
MAPS = ('bbox_mAP', 'segm_mAP')


def use_backend(backend: str) -> None:
    """Make mmcv's ops come from `backend`, before anything imports `mmcv.ops`: `import mmrecvit.mm` may (mmseg's
    utils import it), so that comes last. Both are found before mmrecvit's import hook would answer: the table's
    finder goes first on `sys.meta_path`, and a compiled `_ext` on mmcv's path is what the hook leaves to Python."""
    import mmcv

    if backend == 'table':  # ahead of a compiled _ext; from its file, as its package's import would import mmcv.ops
        spec = importlib.util.spec_from_file_location('mmcv_ext_table', osp.join(REPO, 'mmrecvit', 'mm', 'mmcv_ext.py'))
        table = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(table)
        sys.meta_path.insert(0, table.MMCVExtFinder())
    elif importlib.machinery.PathFinder.find_spec('mmcv._ext', mmcv.__path__) is None:  # mmcv-lite (the import hook
        # would answer find_spec with the table): the compiled _ext of the cached wheel
        sys.path.insert(0, osp.join(REPO, 'tests'))
        from helpers import compiled_mmcv_ext

        path = compiled_mmcv_ext(osp.join(REPO, 'work_dirs', 'compiled_mmcv'))
        if path is None:
            sys.exit(
                '--backend compiled: no compiled mmcv installed and no cached mmcv 2.1.0 wheel (MMRECVIT_WHEEL_DIR)'
            )
        mmcv.__path__.insert(0, osp.dirname(path))
    import mmcv._ext

    import mmrecvit.mm  # noqa: F401  (registration, compat fixes)

    kind = 'compiled' if mmcv._ext.__spec__.origin.endswith('.so') else 'table'
    assert kind == backend, f'wanted the {backend} ops, mmcv._ext is {mmcv._ext}'


def toy_config(model: str, data_root: str, work_dir: str):
    import mmdet
    from mmengine.config import Config

    from mmrecvit.datasets import toy_data_cfg

    cfg = Config.fromfile(osp.join(REPO, 'configs', 'det', 'mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py'))
    cfg.merge_from_dict({**toy_data_cfg('det', data_root), 'work_dir': work_dir})
    if model == 'cascade':
        base = osp.join(
            osp.dirname(mmdet.__file__), '.mim', 'configs', '_base_', 'models', 'cascade-mask-rcnn_r50_fpn.py'
        )
        cascade = Config.fromfile(base).model
        toy = cfg.model.roi_head
        roi = cascade.roi_head
        roi.bbox_roi_extractor.out_channels = roi.mask_roi_extractor.out_channels = toy.bbox_roi_extractor.out_channels
        for head in roi.bbox_head:
            head.update(in_channels=toy.bbox_head.in_channels, fc_out_channels=toy.bbox_head.fc_out_channels)
            head.update(num_classes=toy.bbox_head.num_classes)
        roi.mask_head = toy.mask_head
        for stage in cascade.train_cfg.rcnn:
            stage.sampler.num = cfg.model.train_cfg.rcnn.sampler.num
        cfg.model.type = 'CascadeRCNN'
        cfg.model.roi_head = roi
        cfg.model.train_cfg.rcnn = cascade.train_cfg.rcnn
        cfg.model.test_cfg.rcnn = cascade.test_cfg.rcnn
    return cfg


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--backend', choices=['table', 'compiled'], required=True)
    parser.add_argument('--model', choices=['det', 'cascade'], required=True)
    parser.add_argument('--data-root', default=osp.join(REPO, 'data'))
    parser.add_argument('--work-dir', default=osp.join(REPO, 'work_dirs', 'mmcv_backends'))
    parser.add_argument('--out', required=True, help='JSON lines file the run is appended to')
    parser.add_argument('--iters', type=int, help="training iterations (default: the toy recipe's 800)")
    parser.add_argument('--no-eval', action='store_true', help='train only: compare the losses of short runs')
    parser.add_argument('--seed', type=int, help="the run's seed (default: the toy recipe's, 0); seeds give the noise")
    args = parser.parse_args(argv)
    use_backend(args.backend)

    from mmengine.runner import Runner

    from mmrecvit.datasets import make_toy_data

    make_toy_data(args.data_root, which=['coco'])
    cfg = toy_config(args.model, args.data_root, args.work_dir)
    if args.seed is not None:
        cfg.randomness.seed = args.seed
    run = f'{args.model}_{args.backend}_seed{cfg.randomness.seed}_{time.strftime("%Y%m%d_%H%M%S")}'
    cfg.work_dir = work_dir = osp.join(args.work_dir, run)
    if args.iters:
        cfg.merge_from_dict({'train_cfg.max_iters': args.iters, 'train_cfg.val_interval': args.iters})
    if args.no_eval:
        cfg.val_dataloader = cfg.val_cfg = cfg.val_evaluator = None
    runner = Runner.from_cfg(cfg)
    start = time.perf_counter()
    runner.train()  # evaluates on the toy val set (also the test set) after the last iteration
    seconds = time.perf_counter() - start
    metrics = {} if args.no_eval else {k: runner.message_hub.get_scalar(f'val/coco/{k}').current() for k in MAPS}
    losses = runner.message_hub.get_scalar('train/loss').data[0]
    record = dict(
        backend=args.backend,
        model=args.model,
        iters=runner.iter,
        seed=cfg.randomness.seed,
        train_and_eval_s=round(seconds, 1),
        **{k: float(v) for k, v in metrics.items()},
        losses=[float(v) for v in losses],
        work_dir=work_dir,
    )
    os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
    with open(args.out, 'a') as f:
        f.write(json.dumps(record) + '\n')
    print({k: v for k, v in record.items() if k != 'losses'})
    return record


if __name__ == '__main__':
    main()
