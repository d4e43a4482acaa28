"""The dry run of a recipe, the core its two frameworks share: one training and one test iteration at the recipe's
real sizes on random weights and synthetic data, measured (`step.measure_step`).

`dry_run_mm.py` runs an mmdet / mmseg / mmpretrain recipe through the tools' own Runner, `dry_run_d2.py` a
detectron2 LazyConfig through detectron2's trainer; each is `dry_run(path, DryRunOptions(...)) -> DryRun`
(`tools/analysis_tools/dry_run.py` picks one by the config's kind). Here: what a dry run is asked
(`DryRunOptions`) and what it measured (`DryRun`, the tables' record, `mmrecvit/mm/costs.py`), the datasets'
facts its synthetic images and schedules use (`DATASETS`), the instances both draw (`random_boxes`) and the test
iteration both measure (`measure_test`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ..models import ViTBackbone
from ..models.flops import total_flops
from .step import StepMeasurement, measure_step


@dataclass
class DryRunOptions:
    """How a dry run runs its recipe; every default is the recipe as written."""

    batch: int | None = None  # images per iteration (default: the recipe's per-GPU batch)
    repeats: int = 1  # timed iterations of each kind
    device: str | None = None  # default: cuda where torch sees a GPU, else cpu
    with_cp: bool | None = None  # the backbone's activation checkpointing
    test: bool = True  # also a test iteration
    cfg_options: dict | None = None  # overrides: mmengine's --cfg-options, or a LazyConfig's
    image_hw: tuple[int, int] | None = None  # the synthetic images' size (default: the dataset's, `DATASETS`)
    progress: Callable[[str], None] | None = None  # told what runs next

    def torch_device(self) -> torch.device:
        return torch.device(self.device or ('cuda' if torch.cuda.is_available() else 'cpu'))

    def say(self, what: str) -> None:
        if self.progress is not None:
            self.progress(what)


def measure_test(
    step: Callable[[Any], Any], batch: Any, images: int, backbone: nn.Module | None, options: DryRunOptions
) -> tuple[StepMeasurement, float | None]:
    """A test iteration, `step(batch)` without gradients, measured on fresh copies of `batch`; and the FLOP model
    of the backbone's forwards in it (an mmrecvit backbone's `stats.work`; several for a sliding-window test) for
    the `images` of the batch, None for another backbone."""
    copies = [copy.deepcopy(batch) for _ in range(options.repeats + 1)]

    def test_step() -> Any:
        with torch.no_grad():
            return step(copies.pop())

    forwards: list[float] = []
    hook = None
    if isinstance(backbone, ViTBackbone):
        hook = backbone.register_forward_hook(lambda m, a, o: forwards.append(float(total_flops(o.stats.work))))
    device, say = options.torch_device(), options.say
    measured = measure_step(test_step, device, options.repeats, progress=lambda s: say(f'test {s}'))
    if hook is None:
        return measured, None
    hook.remove()
    return measured, sum(forwards) / (options.repeats + 1) * images


def random_boxes(rng: np.random.Generator, n: int, image_hw: tuple[int, int]) -> np.ndarray:
    """`n` random boxes (x1, y1, x2, y2; float32) of 5-40 % of the image's sides, inside an image of `image_hw`."""
    h, w = image_hw
    size = rng.uniform(0.05, 0.4, (n, 2)) * (w, h)
    x1y1 = rng.uniform(0, 1, (n, 2)) * ((w, h) - size)
    return np.concatenate([x1y1, x1y1 + size], 1).astype(np.float32)


class RecipeError(ValueError):
    """The config is not a recipe the dry run can run (the message names it and what is allowed)."""


@dataclass(frozen=True)
class DatasetFacts:
    name: str
    train_images: int  # what an epoch is
    image_hw: tuple[int, int]  # the synthetic images: the dataset's most common size (H, W)


DATASETS = {
    'mmdet': DatasetFacts('COCO train2017', 118287, (480, 640)),
    'mmseg': DatasetFacts('ADE20K train', 20210, (512, 683)),
    'mmpretrain': DatasetFacts('ImageNet-1k train', 1281167, (375, 500)),
}
DATASETS['detectron2'] = DATASETS['mmdet']  # our LazyConfigs train on COCO


@dataclass
class Schedule:
    images: int  # images the schedule trains on (every step's batch summed)
    batch: int  # global batch
    iterations: int
    dataset: DatasetFacts
    how: str  # in words


@dataclass
class DryRun:
    """What one dry run of a recipe measured (per iteration; `per_image` divides by the batch)."""

    config: str
    scope: str
    backbone: str
    with_cp: bool | None
    device: str
    dtype: str
    batch: int
    params: int
    schedule: Schedule
    train_shape: tuple[int, ...] = ()
    test_shape: tuple[int, ...] = ()
    train: StepMeasurement | None = None
    test: StepMeasurement | None = None
    backbone_model_flops: float | None = None  # the backbone's FLOP model of one test iteration
    backbone_module: str = 'backbone'  # the mmrecvit backbone's name in the model (detectron2: deeper)
    notes: list[str] = field(default_factory=list)

    def record(self) -> dict:
        """Plain data (JSON) for the tables (`mmrecvit/mm/costs.py`); per-module FLOPs left out."""

        def phase(m: StepMeasurement | None) -> dict | None:
            return (
                None
                if m is None
                else dict(
                    seconds=m.seconds,
                    peak_bytes=m.peak_bytes,
                    saved_bytes=m.saved_bytes,
                    flops=m.flops,
                    backbone_flops=m.module(self.backbone_module),
                )
            )

        out = dataclasses.asdict(self)
        out.update(
            train=phase(self.train),
            test=phase(self.test),
            schedule=dict(
                images=self.schedule.images,
                batch=self.schedule.batch,
                iterations=self.schedule.iterations,
                dataset=self.schedule.dataset.name,
                how=self.schedule.how,
            ),
        )
        return out
