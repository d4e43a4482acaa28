"""Dry run of a detectron2 LazyConfig recipe (configs/d2/): one training and one test iteration at its real sizes.

The d2 twin of `dry_run_mm.py`, with detectron2's own parts: the config's `model` instantiated with
random weights (the backbone's `pretrained` is dropped), its `optimizer` (our layer decay), its train and test
`DatasetMapper`s (`dataloader.{train,test}.mapper`: LSJ's flip, resize and 1024 crop; the test resize) applied
to synthetic COCO-sized images (PNG files with random boxes, polygon masks and labels, as a registered COCO set's
records are), and detectron2's own training step: `SimpleTrainer.run_step` (forward, sum of the loss dict,
zero_grad, backward, optimizer step), `AMPTrainer`'s on CUDA when `train.amp.enabled` (on the CPU the recipe runs
in fp32: detectron2's AMPTrainer needs CUDA). A test iteration is the model in eval mode on a test-mapper batch,
without gradients. Both are measured by `step.measure_step` (the test iteration by the shared
`dry_run.measure_test`); the saved activations are read at the optimizer's `zero_grad`, which detectron2's
trainers call right before the backward.

Batch: `dataloader.train.total_batch_size` is the global batch; per GPU it is that over the 64 GPUs ViTDet trains
on (`D2_GPUS`; projects/ViTDet/README.md: "64 GPUs with batch size as 64"), one image.
"""

from __future__ import annotations

import copy
import os.path as osp
import tempfile
from typing import Any

import numpy as np
import torch
from detectron2.config import LazyConfig, instantiate
from detectron2.engine import AMPTrainer, SimpleTrainer
from detectron2.structures import BoxMode
from detectron2.utils.events import EventStorage
from PIL import Image

from ..models import ViTBackbone
from .dry_run import DATASETS, DryRun, DryRunOptions, RecipeError, Schedule, measure_test, random_boxes
from .step import measure_step

D2_GPUS = 64  # ViTDet's: the per-GPU batch is total_batch_size / 64
NET = 'backbone.net.net'  # the mmrecvit backbone in a RecViTRCNN: LayerFeaturePyramid.net (RecViTBackbone).net
RECIPE_KEYS = ('model', 'dataloader.train.mapper', 'dataloader.test.mapper', 'optimizer', 'train.max_iter')


def _get(cfg: Any, key: str) -> Any:
    for part in key.split('.'):
        cfg = cfg.get(part) if hasattr(cfg, 'get') else None
    return cfg


def load_recipe(path: str, overrides: dict | None = None) -> Any:
    """The LazyConfig at `path` with `overrides` ({key: value}, as `--cfg-options`); `RecipeError` if not a recipe."""
    cfg = LazyConfig.load(path)
    if overrides:
        cfg = LazyConfig.apply_overrides(cfg, [f'{k}={v!r}' for k, v in overrides.items()])
    missing = [k for k in RECIPE_KEYS if _get(cfg, k) is None]
    if missing or _get(cfg, 'model.backbone.net') is None:
        raise RecipeError(
            f'{path} is not a detectron2 recipe: it has no {", ".join(missing or ["model.backbone.net"])}'
            f' (a recipe has all of {list(RECIPE_KEYS)} and an mmrecvit backbone at model.backbone.net;'
            ' configs/d2/common/ files are parts of one)'
        )
    return cfg


def schedule(cfg: Any) -> Schedule:
    batch, iters = int(cfg.dataloader.train.total_batch_size), int(cfg.train.max_iter)
    facts = DATASETS['detectron2']
    return Schedule(
        iters * batch,
        batch,
        iters,
        facts,
        f'{iters} iterations x batch {batch} (total_batch_size; '
        f'{iters * batch / facts.train_images:.1f} epochs of {facts.name})',
    )


def synthetic_records(
    folder: str, n: int, image_hw: tuple[int, int], classes: int, instances: int = 8, seed: int = 0
) -> list[dict]:
    """`n` dataset records as `register_coco_instances` makes them, their random images written to `folder`:
    `instances` boxes (`random_boxes`), each with an elliptic polygon and a label < `classes`."""
    h, w = image_hw
    angles = np.linspace(0, 2 * np.pi, 16, endpoint=False)
    records = []
    for i in range(n):
        rng = np.random.default_rng(seed + i)
        file_name = osp.join(folder, f'synthetic_{i:06d}.png')
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(file_name)
        annotations = []
        for box, label in zip(random_boxes(rng, instances, image_hw), rng.integers(0, classes, instances)):
            (cx, cy), (rx, ry) = (box[:2] + box[2:]) / 2, (box[2:] - box[:2]) / 2
            polygon = np.stack([cx + rx * np.cos(angles), cy + ry * np.sin(angles)], 1).ravel()
            annotations.append(
                dict(
                    bbox=box.tolist(),
                    bbox_mode=BoxMode.XYXY_ABS,
                    category_id=int(label),
                    segmentation=[polygon.tolist()],
                    iscrowd=0,
                )
            )
        records.append(dict(file_name=file_name, height=h, width=w, image_id=i, annotations=annotations))
    return records


def dry_run(path: str, options: DryRunOptions | None = None) -> DryRun:
    """Build the LazyConfig recipe at `path` and measure a training (and a test) iteration; see the module
    docstring and `DryRunOptions` (`cfg_options`: LazyConfig overrides)."""
    opts = options or DryRunOptions()
    dev, say = opts.torch_device(), opts.say
    cfg = load_recipe(path, opts.cfg_options)
    net_cfg = cfg.model.backbone.net
    net_cfg.pretrained, net_cfg.init_cfg = None, None  # random weights
    if opts.with_cp is not None:
        net_cfg.with_cp = opts.with_cp
    amp = bool(_get(cfg, 'train.amp.enabled'))
    dtype, notes = 'fp32', []
    if amp and dev.type == 'cuda':
        dtype = 'AMP fp16'
    elif amp:
        notes.append("AMP recipe run in fp32 (detectron2's AMPTrainer needs CUDA)")
    say('build')
    model = instantiate(cfg.model).to(dev)
    net = model.get_submodule(NET)
    if not isinstance(net, ViTBackbone):
        raise RecipeError(f'{path}: model.{NET} is a {type(net).__name__}, not an mmrecvit backbone')
    cfg.optimizer.params.model = model
    optimizer = instantiate(cfg.optimizer)
    per_gpu = opts.batch or max(1, int(cfg.dataloader.train.total_batch_size) // D2_GPUS)
    result = DryRun(
        config=path,
        scope='detectron2',
        backbone=type(net).__name__,
        with_cp=net.with_cp,
        device=str(dev),
        dtype=dtype,
        batch=per_gpu,
        params=sum(p.numel() for p in model.parameters()),
        schedule=schedule(cfg),
        backbone_module=NET,
        notes=notes,
    )
    classes = int(_get(cfg, 'model.roi_heads.num_classes') or 80)
    with tempfile.TemporaryDirectory(prefix='dry_run_') as folder:
        say('data')
        records = synthetic_records(folder, per_gpu, tuple(opts.image_hw or DATASETS['detectron2'].image_hw), classes)
        train_batch = [instantiate(cfg.dataloader.train.mapper)(copy.deepcopy(r)) for r in records]
        test_batch = [instantiate(cfg.dataloader.test.mapper)(copy.deepcopy(r)) for r in records] if opts.test else []
    with torch.no_grad():
        result.train_shape = tuple(model.preprocess_image(train_batch).tensor.shape)
    loader = iter([copy.deepcopy(train_batch) for _ in range(opts.repeats + 1)])
    trainer = (AMPTrainer if dtype != 'fp32' else SimpleTrainer)(model, loader, optimizer)
    with EventStorage(0) as trainer.storage:  # the trainer's step logs its losses and RecViTRCNN its statistics
        trainer.iter = 0
        result.train = measure_step(
            trainer.run_step, dev, opts.repeats, probe=(optimizer, 'zero_grad'), progress=lambda s: say(f'train {s}')
        )
    if opts.test:
        with torch.no_grad():
            result.test_shape = tuple(model.preprocess_image(test_batch).tensor.shape)
        model.eval()
        result.test, result.backbone_model_flops = measure_test(model, test_batch, len(test_batch), net, opts)
    return result
