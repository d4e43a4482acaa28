"""Dry run of an mmdet / mmseg / mmpretrain recipe: one training and one test iteration at its real sizes.

The recipe is built as written through the tools' own Runner (`cli.build_runner`: model, data preprocessor
with its batch augments, optimizer wrapper and its constructor, e.g. layer decay), with random weights (its
`init_cfg` checkpoint is not loaded). Only the dataset is replaced: `SyntheticDataset` makes random images of
the dataset's typical size (`DATASETS`) with a few random instances (boxes, masks, labels), a segmentation
map or a class label, already "loaded", and sends them through the recipe's own train / test pipeline with
its `LoadImageFromFile` / `LoadAnnotations` steps taken out, so the model sees the inputs the recipe makes
(LSJ's 1024x1024, the 512x512 crops, the 224x224 RandomResizedCrop). The batches go through the recipe's
own dataloader settings (sampler, batch sampler, collate), one worker.

A training iteration is `model.train_step(batch, optim_wrapper)` (preprocess, forward, loss, backward,
optimizer step) after the hooks that change what it computes have run (`MODEL_HOOKS`: the backbones' aux
losses in the loss, TF32); a test iteration `model.test_step(batch)` without gradients. Both are measured by
`step.measure_step` (the test iteration by the shared `dry_run.measure_test`). AMP recipes run in fp32 on the
CPU (mmengine's AmpOptimWrapper needs CUDA): `DryRun.dtype` says what ran.
"""

from __future__ import annotations

import copy
import importlib
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from mmengine.config import Config
from mmengine.dataset import Compose
from mmengine.runner import Runner

from ..mm.cli import build_runner
from ..mm.registry import config_scope  # mm recipes (detectron2 LazyConfigs: dry_run_d2.py)
from .dry_run import DATASETS, DryRun, DryRunOptions, RecipeError, Schedule, measure_test, random_boxes
from .step import measure_step

MODEL_HOOKS = ('RecursionHook', 'TF32Hook')  # hooks that change an iteration's computation: run before it
RECIPE_KEYS = ('model', 'train_dataloader', 'train_cfg', 'optim_wrapper', 'test_dataloader')


def check_recipe(cfg: Config, path: str) -> str:
    """The recipe's framework (default_scope); `RecipeError` naming what is missing otherwise."""
    recipe = f' (and a recipe has all of {list(RECIPE_KEYS)}), or a detectron2 LazyConfig with a model, dataloader, '
    scope = config_scope(cfg, f'{path} is not a recipe', RecipeError, recipe + 'optimizer and train')
    missing = [k for k in RECIPE_KEYS if cfg.get(k) is None]
    if missing:
        raise RecipeError(
            f'{path} is not a recipe: it has no {", ".join(missing)} (a recipe has all of '
            f'{list(RECIPE_KEYS)}; configs/*/_base_/models/ files are parts of one)'
        )
    return scope


def innermost(dataset_cfg: dict) -> tuple[dict, int]:
    """The dataset config holding the pipeline (inside wrappers such as RepeatDataset) and the repeats."""
    repeats = 1
    while 'pipeline' not in dataset_cfg and 'dataset' in dataset_cfg:
        repeats *= int(dataset_cfg.get('times', 1))
        dataset_cfg = dataset_cfg['dataset']
    if 'pipeline' not in dataset_cfg:
        raise RecipeError(f'no pipeline in the dataset {dataset_cfg.get("type")!r}')
    return dataset_cfg, repeats


def num_classes(scope: str, dataset_cfg: dict) -> int:
    classes = (dataset_cfg.get('metainfo') or {}).get('classes')
    if classes is None:
        registry = importlib.import_module(f'{scope}.registry')
        classes = registry.DATASETS.get(dataset_cfg['type']).METAINFO['classes']
    return len(classes)


class SyntheticDataset(torch.utils.data.Dataset):
    """Random images of size `image_hw` with random annotations, through `pipeline`.

    The sample starts as `LoadImageFromFile` leaves one (that step is dropped); `LoadAnnotations` is replaced by
    a step adding the annotations, where the recipe loads them (mmseg's test pipeline resizes the image first).

    mmdet: `num_instances` boxes of 5-40 % of the image side, each with an elliptic mask and a label;
    mmseg: a map of a background class and `num_instances` rectangles of other classes (labels already
    reduced, 0..num_classes-1); mmpretrain: one label. Sample i is the same on every call (seed + i).
    """

    def __init__(
        self,
        scope: str,
        pipeline: list[dict],
        classes: int,
        image_hw: tuple[int, int],
        length: int = 64,
        num_instances: int = 8,
        seed: int = 0,
    ) -> None:
        self.scope, self.classes, self.image_hw = scope, classes, tuple(image_hw)
        self.length, self.num_instances, self.seed = length, num_instances, seed
        steps = []
        for t in pipeline:
            kind = str(t.get('type', ''))
            if kind.startswith('LoadAnnotations'):
                steps.append(self.add_annotations)
            elif not kind.startswith('LoadImageFromFile'):
                steps.append(t)
        if self.add_annotations not in steps:  # mmpretrain: the label comes with the sample
            steps.insert(0, self.add_annotations)
        self.pipeline = Compose(steps)
        self.metainfo = dict(classes=tuple(f'class{i}' for i in range(classes)))

    def __len__(self) -> int:
        return self.length

    def get_data_info(self, idx: int) -> dict:
        h, w = self.image_hw
        return dict(height=h, width=w, img_id=idx)

    @staticmethod
    def add_annotations(results: dict) -> dict:
        results.update(results.pop('synthetic_annotations'))
        return results

    def sample(self, idx: int) -> dict:
        rng = np.random.default_rng(self.seed + idx)
        h, w = self.image_hw
        results = dict(
            img=rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
            img_shape=(h, w),
            ori_shape=(h, w),
            img_path=f'synthetic_{idx:06d}.jpg',
            img_id=idx,
        )
        n, ann = self.num_instances, {}
        if self.scope == 'mmdet':
            from mmdet.structures.bbox import HorizontalBoxes
            from mmdet.structures.mask import BitmapMasks

            boxes = random_boxes(rng, n, (h, w))
            yy, xx = np.mgrid[:h, :w]
            centre, half = (boxes[:, :2] + boxes[:, 2:]) / 2, (boxes[:, 2:] - boxes[:, :2]) / 2
            masks = (
                ((xx - centre[:, 0, None, None]) / half[:, 0, None, None]) ** 2
                + ((yy - centre[:, 1, None, None]) / half[:, 1, None, None]) ** 2
                <= 1
            ).astype(np.uint8)
            ann.update(
                gt_bboxes=HorizontalBoxes(boxes),
                gt_bboxes_labels=rng.integers(0, self.classes, n),
                gt_ignore_flags=np.zeros(n, bool),
                gt_masks=BitmapMasks(masks, h, w),
            )
        elif self.scope == 'mmseg':
            seg = np.full((h, w), rng.integers(0, self.classes), np.uint8)
            for _ in range(n):
                y, x = rng.integers(0, h - 1), rng.integers(0, w - 1)
                seg[y : y + rng.integers(1, h // 2), x : x + rng.integers(1, w // 2)] = rng.integers(0, self.classes)
            ann.update(gt_seg_map=seg, seg_fields=['gt_seg_map'], reduce_zero_label=False)
        else:
            ann.update(gt_label=int(rng.integers(0, self.classes)))
        return dict(results, synthetic_annotations=ann)

    def __getitem__(self, idx: int) -> dict:
        return self.pipeline(self.sample(idx))


def global_batch(cfg: Config, path: str) -> tuple[int, str]:
    """Images per optimizer step: the name's GPUs x images (`16xb4`), else auto_scale_lr.base_batch_size."""
    m = re.search(r'_(\d+)xb(\d+)', Path(path).name)
    if m:
        gpus, per_gpu = int(m[1]), int(m[2])
        return gpus * per_gpu * int(cfg.optim_wrapper.get('accumulative_counts', 1)), f'{gpus}x{per_gpu}'
    base = (cfg.get('auto_scale_lr') or {}).get('base_batch_size')
    if base:
        return int(base), f'auto_scale_lr.base_batch_size {base}'
    raise RecipeError(f'{path}: no batch in the name (NxbM) and no auto_scale_lr.base_batch_size')


def schedule(cfg: Config, path: str, scope: str) -> Schedule:
    batch, batch_how = global_batch(cfg, path)
    facts = DATASETS[scope]
    loop = cfg.train_cfg
    if 'max_iters' in loop:
        iters = int(loop.max_iters)
        return Schedule(iters * batch, batch, iters, facts, f'{iters} iterations x batch {batch} ({batch_how})')
    _, repeats = innermost(cfg.train_dataloader.dataset)
    epochs = int(loop.max_epochs) * repeats
    images = epochs * facts.train_images
    rep = f' ({loop.max_epochs} x RepeatDataset {repeats})' if repeats > 1 else ''
    return Schedule(
        images,
        batch,
        -(-images // batch),
        facts,
        f'{epochs} epochs{rep} x {facts.train_images} images ({facts.name}), batch {batch} ({batch_how})',
    )


def prepare_config(
    cfg: Config, device: torch.device, work_dir: str, with_cp: bool | None, cfg_options: dict | None
) -> tuple[Config, str, list[str]]:
    """The recipe's config for the dry run (work dir, no checkpoint, fp32 on the CPU, with_cp)."""
    cfg = copy.deepcopy(cfg)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    notes = []
    cfg.work_dir, cfg.load_from, cfg.resume, cfg.launcher = work_dir, None, False, 'none'
    cfg.log_level = 'WARNING'
    wrapper = cfg.optim_wrapper
    dtype = 'fp32'
    if 'Amp' in str(wrapper.get('type', '')):
        if device.type == 'cuda':
            dtype = f'AMP {wrapper.get("dtype") or "fp16"}'
        else:
            for key in ('loss_scale', 'dtype', 'use_fsdp'):
                wrapper.pop(key, None)
            wrapper.type = 'OptimWrapper'
            notes.append('AMP recipe run in fp32 (mmengine AMP needs a GPU)')
    if with_cp is not None:
        backbone = cfg.model.get('backbone', {})
        if backbone.get('with_cp') is None and 'type' not in backbone:
            raise RecipeError('with_cp: the model has no backbone config to set it on')
        backbone['with_cp'] = with_cp
    return cfg, dtype, notes


def _batch(runner: Runner, dataloader_cfg: dict, dataset: SyntheticDataset, batch: int | None) -> Any:
    loader = dict(copy.deepcopy(dataloader_cfg), dataset=dataset, num_workers=0, persistent_workers=False)
    if batch is not None:
        loader['batch_size'] = batch
    return next(iter(Runner.build_dataloader(loader, seed=0)))


def dry_run(path: str, options: DryRunOptions | None = None) -> DryRun:
    """Build the recipe at `path` and measure a training (and a test) iteration; see the module docstring and
    `DryRunOptions` (`batch`: images per iteration, default the recipe's per-GPU batch)."""
    opts = options or DryRunOptions()
    dev, say, batch = opts.torch_device(), opts.say, opts.batch
    cfg0 = Config.fromfile(path)
    scope = check_recipe(cfg0, path)
    with tempfile.TemporaryDirectory(prefix='dry_run_') as work_dir:
        cfg, dtype, notes = prepare_config(cfg0, dev, work_dir, opts.with_cp, opts.cfg_options)
        say('build')
        runner = build_runner(cfg, 'none', 'dry_run.py')
        model = runner.model.to(dev)
        for hook in runner.hooks:
            if type(hook).__name__ in MODEL_HOOKS:
                hook.before_run(runner)
                hook.before_train(runner)
        backbone = getattr(model, 'backbone', None)
        result = DryRun(
            config=path,
            scope=scope,
            backbone=type(backbone).__name__,
            with_cp=getattr(backbone, 'with_cp', None),
            device=str(dev),
            dtype=dtype,
            batch=0,
            params=sum(p.numel() for p in model.parameters()),
            schedule=schedule(cfg, path, scope),
            notes=notes,
        )
        hw = tuple(opts.image_hw or DATASETS[scope].image_hw)

        def dataset(loader_cfg: dict) -> SyntheticDataset:
            inner, _ = innermost(loader_cfg.dataset)
            return SyntheticDataset(scope, inner.pipeline, num_classes(scope, inner), hw)

        say('data')
        train_size = batch
        if batch == 1 and any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
            train_size = 2  # e.g. UPerHead's 1x1 pooling: BatchNorm cannot train on one value per channel
            notes.append('trained at batch 2: BatchNorm in the heads needs more than one value per channel')
        train_batch = _batch(runner, cfg.train_dataloader, dataset(cfg.train_dataloader), train_size)
        result.batch = len(train_batch['inputs'])
        with torch.no_grad():
            result.train_shape = tuple(model.data_preprocessor(copy.deepcopy(train_batch), True)['inputs'].shape)
        optim_wrapper = runner.build_optim_wrapper(cfg.optim_wrapper)
        model.train()
        copies = [copy.deepcopy(train_batch) for _ in range(opts.repeats + 1)]
        result.train = measure_step(
            lambda: model.train_step(copies.pop(), optim_wrapper),
            dev,
            opts.repeats,
            probe=(optim_wrapper, 'backward'),
            progress=lambda s: say(f'train {s}'),
        )
        if opts.test:
            test_batch = _batch(runner, cfg.test_dataloader, dataset(cfg.test_dataloader), batch)
            with torch.no_grad():
                result.test_shape = tuple(model.data_preprocessor(copy.deepcopy(test_batch), False)['inputs'].shape)
            model.eval()  # a sliding-window test runs several backbone forwards: `measure_test` sums them
            result.test, result.backbone_model_flops = measure_test(
                model.test_step, test_batch, len(test_batch['inputs']), backbone, opts
            )
    return result
