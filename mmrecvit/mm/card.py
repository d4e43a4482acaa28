"""Everything a recipe trains and tests with, as flat facts a comparison checks (tools/analysis_tools/compare.py).

A recipe's facts are its whole resolved config, flattened (`config_diff.flatten`: every key the runner reads, the
pipelines keyed by step type, the hooks by type), and what the built backbone and the recipe's start add:

* config: every key of the runner's sections (`RUNTIME`): model, data and pipelines, optimizer, schedulers, hooks,
  AMP, seeds, ... (config variables such as `embed_dim` or `backbone` count where the runner reads them). Keys a
  backbone fact below states in full (`COVERED`: the start, out_indices, final_norm, the eval knobs) are left to it;
* the backbone, built: `params` (M), `gflops` (per test image, ours) and `gflops_paper` (the papers' convention),
  `train_gflops` (per training image: forward and backward, and with_cp's recomputed forward), `global_steps` (the
  block applications under global attention at the test grid), `feature_layers` (the layers the pyramid reads),
  `final_norm`, `eval_knobs`, `lr_scale` (the parameter-weighted mean learning-rate factor under the recipe's layer
  decay and policy: `mm/optim.py`);
* the start: `start.*` and `pretraining.*` (`mm/card_start.py`).

`MEASURED` facts depend on the task's sizes and optimizer, so a backbone file states only why they differ, and their
values are declared in one table, `configs/measured.yml` (`MEASURED_TABLE`), under each recipe's file name. The work
is the forward's own record (`stats.work`: the plan it ran); a ranker's depths need its trained weights: with them,
the mean over the images given, else the full depth (said).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import yaml
from mmengine.config import Config
from torch import Tensor, nn

from ..adapters import backbone_rates, layer_depth_table
from ..inputs import InputError
from ..models import BACKBONES
from ..models.flops import BlockWork
from ..models.layer_decay import lr_scale
from ..models.start import load_start
from ..models.windows import Windows
from .card_start import start_facts
from .config_diff import flatten

RUNTIME = (  # the sections mmengine's Runner (and tools/test.py's --tta) reads
    'model', 'data_preprocessor', 'train_dataloader', 'val_dataloader', 'test_dataloader', 'train_cfg', 'val_cfg',
    'test_cfg', 'optim_wrapper', 'param_scheduler', 'val_evaluator', 'test_evaluator', 'default_hooks',
    'custom_hooks', 'auto_scale_lr', 'randomness', 'env_cfg', 'log_processor', 'log_level', 'load_from', 'resume',
    'default_scope', 'custom_imports', 'find_unused_parameters', 'visualizer', 'tta_model', 'tta_pipeline',
)  # fmt: skip
KNOBS = {  # the test-time knobs of a method, as attributes of the built backbone (docs/methods/)
    'SRViT': ('eval_recursions',),
    'EdgeRecViT': ('max_depth', 'depth_shift'),
    'MoRViT': ('capacity_schedule',),
}
COVERED = ('model.backbone.init_cfg.', 'model.backbone.out_indices', 'model.backbone.final_norm')
COVERED += tuple(
    f'model.backbone.{k}' for k in ('eval_recursions', 'capacities', 'max_depth', 'depth_shift', 'compute')
)
MEASURED = ('params', 'gflops', 'gflops_paper', 'train_gflops', 'global_steps', 'lr_scale')
MEASURED_TABLE = 'configs/measured.yml'  # the MEASURED values of the repository's recipes, by file name
NOT_ARGUMENTS = ('_delete_', 'init_cfg', 'pretrained')


@dataclasses.dataclass
class Row:
    """One recipe: its facts, what its card shows, what it declares, and lines about what it cannot say."""

    path: str
    name: str
    facts: dict[str, Any]
    cells: dict[str, str]
    recipe: dict[str, Any]
    notes: list[str]


def measured_table(path: str | Path) -> dict[str, dict[str, Any]]:
    """{recipe file name: {MEASURED fact: value}}, the table at `path` read as data (`yaml.safe_load`); a file that
    is not YAML, or an entry that is not a mapping of `MEASURED` facts, is refused in one line naming it."""
    try:
        table = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as e:  # its line and column, in one line
        raise InputError(f'{path}: not a YAML table of measured facts: {" ".join(str(e).split())}') from e
    if not isinstance(table, dict):
        raise InputError(f'{path}: a mapping of recipe file names to their measured facts, not {type(table).__name__}')
    for name, entry in table.items():
        wrong = sorted(set(entry) - set(MEASURED)) if isinstance(entry, dict) else entry
        if wrong or not isinstance(entry, dict):
            raise InputError(f'{path}: {name}: {wrong!r} is not a mapping of measured facts ({", ".join(MEASURED)})')
    return table


def table_line(name: str, measured: Mapping[str, Any]) -> str:
    """The line of `name` in a measured table (`MEASURED_TABLE`'s own form)."""
    return f'{name}: ' + yaml.safe_dump(dict(measured), default_flow_style=True, width=1000).strip()


def gflops(value: float) -> float:
    return round(value / 1e9, 1 if value >= 1e10 else 2)


def build_backbone(args: dict) -> nn.Module:
    args = {k: v for k, v in args.items() if k not in NOT_ARGUMENTS}
    return BACKBONES[args.pop('type')](**args)


def pipeline_of(dataloader: Any) -> list:
    dataset = dataloader.dataset
    while 'pipeline' not in dataset:  # a RepeatDataset, ConcatDataset, ...
        dataset = dataset.dataset
    return dataset.pipeline


def test_size(cfg: Config) -> tuple[int, int]:
    """One square test image as the recipe tests it: a sliding window's crop, else the test pipeline's pad size, or
    its resize (keep_ratio: a square image goes to the scale's short side; OpenMMLab's scales are (w, h))."""
    test_cfg = cfg.model.get('test_cfg') or {}
    if test_cfg.get('mode') == 'slide':
        return tuple(test_cfg['crop_size'])
    steps = (('CenterCrop', 'crop_size'), ('Pad', 'size'), ('Resize', 'scale'))
    return _size_of(pipeline_of(cfg.test_dataloader), steps, cfg.filename, 'test')


def train_size(cfg: Config) -> tuple[int, int]:
    """The largest training input: the batch pad (LSJ), else the crop, else the resize of the train pipeline."""
    for augment in cfg.model.get('data_preprocessor', {}).get('batch_augments') or []:
        if augment['type'] == 'BatchFixedSizePad':
            return tuple(augment['size'])
    steps = (
        ('RandomCrop', 'crop_size'),
        ('RandomResizedCrop', 'scale'),
        ('Resize', 'scale'),
        ('RandomResize', 'scale'),
    )
    return _size_of(pipeline_of(cfg.train_dataloader), steps, cfg.filename, 'train')


def _size_of(pipeline: list, steps: tuple, filename: str, which: str) -> tuple[int, int]:
    found = {t['type']: t for t in pipeline}
    for name, key in steps:
        size = found.get(name, {}).get(key)
        if size:
            if isinstance(size, int):
                return size, size
            if found[name].get('keep_ratio'):
                return min(size), min(size)
            return tuple(size) if name.endswith('Crop') else (size[1], size[0])  # crops are (h, w), scales (w, h)
    raise ValueError(f'{filename}: no {which} size in its {which} pipeline ({", ".join(n for n, _ in steps)})')


@torch.no_grad()
def forward_work(model: nn.Module, x: Tensor, train: bool) -> tuple[list, list]:
    """(the work of one image, the steps) as the forward in train or eval mode records it (`stats`)."""
    model.train(train)
    torch.manual_seed(0)  # step dropout, drop path: one fixed draw
    stats = model(x).stats
    return list(stats.work), list(stats.plan.steps)


def backbone_facts(cfg: Config, model: nn.Module, images: Tensor | None) -> tuple[dict[str, Any], dict[str, str]]:
    """(facts, cells) of the built backbone at the recipe's sizes (module docstring)."""
    grid = lambda size: tuple(math.ceil(s / model.patch_size) for s in size)  # noqa: E731
    h, w = test_size(cfg)
    cells = {}
    if type(model).__name__ == 'EdgeRecViT' and images is None and model.depth_shift < model.depth - 1:
        work = [model.embed_work(grid((h, w))), *model.plan(None, grid((h, w))).work()]
        steps = list(model.plan(None, grid((h, w))).steps)
        cells['work_note'] = 'full depth: the ranker decides (no trained ranker or no --images)'
    else:
        x = torch.zeros(1, 3, h, w) if images is None else images
        work, steps = forward_work(model, x, train=False)
        if images is not None and type(model).__name__ == 'EdgeRecViT':
            cells['work_note'] = f'mean over {len(images)} images'
    paper = [w for w in work if getattr(w, 'name', None) == 'patch_embed']
    paper += [dataclasses.replace(w, new_kv=0.0) for w in work if isinstance(w, BlockWork)]
    train_work, _ = forward_work(model, torch.zeros(1, 3, *train_size(cfg)), train=True)
    forward = sum(w.flops for w in train_work)
    embed = sum(w.flops for w in train_work if getattr(w, 'name', None) == 'patch_embed')
    # with_cp recomputes each block in the backward up to its last saved tensor (torch's early stop): all but fc2
    blocks = [w for w in train_work if isinstance(w, BlockWork)]
    recompute = sum(w.flops - 2 * w.queries * w.mlp_hidden * w.dim for w in blocks) if model.with_cp else 0.0
    # reViT under with_cp merges its experts inside each checkpointed block call, so the merge is recomputed too
    merges = [w for w in train_work if getattr(w, 'name', '').endswith('(expert merge)')]
    recompute += sum(w.flops for w in merges) if model.with_cp else 0.0
    glob = [s.index for s in steps if not isinstance(s.layout, Windows)]
    facts = dict(
        params=round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
        gflops=gflops(sum(w.flops for w in work)),
        gflops_paper=gflops(sum(w.flops for w in paper)),
        # backward: 2 products per forward product but the patch embedding's (its input needs no gradient)
        train_gflops=gflops(3 * forward - embed + recompute),
        global_steps=f'all {len(steps)}' if len(glob) == len(steps) else f'{len(glob)} of {len(steps)}',
    )
    cells['global_steps'] = f'{facts["global_steps"]} ({", ".join(map(str, glob))})' if len(glob) < len(steps) else ''
    return {**facts, **method_facts(model)}, cells


def method_facts(model: nn.Module) -> dict[str, Any]:
    """The built backbone's facts that need no forward and no task: its feature layers, final norm, eval knobs."""
    return dict(
        feature_layers=', '.join(map(str, model.out_indices)),
        final_norm=not isinstance(model.norm, nn.Identity),
        eval_knobs=knobs_of(model),
    )


def knobs_of(model: nn.Module) -> str:
    """The test-time knobs in force (`KNOBS`; `compute` for every method), '–' for none."""
    knobs = [(k, getattr(model, k)) for k in KNOBS.get(type(model).__name__, ())]
    knobs += [('compute', model.compute)] if model.compute is not None else []
    text = lambda v: ', '.join(f'{x:g}' for x in v) if isinstance(v, (list, tuple)) else str(v)  # noqa: E731
    return '; '.join(f'{k} {text(v)}' for k, v in knobs) or '–'


def lr_facts(cfg: Config, model: nn.Module) -> tuple[float, str]:
    """(the parameter-weighted mean lr scale of the backbone, the card's text) under the recipe's layer decay."""
    optim = cfg.optim_wrapper
    if optim.get('constructor') != 'LayerDecayOptimWrapperConstructor':
        return 1.0, 'x1 (no layer decay)'
    rate = optim.paramwise_cfg.layer_decay_rate
    policy = optim.paramwise_cfg.get('layer_decay_policy', 'per_layer')
    rates, depths = backbone_rates(model, rate, policy), layer_depth_table(model)
    params = list(model.parameters())
    total = sum(p.numel() for p in params)
    mean = sum(p.numel() * lr_scale(rates[id(p)], *depths[id(p)][1:]) for p in params) / total
    own = next(iter(rates.values()))
    fresh = sum(p.numel() for p in params if depths[id(p)][1] > depths[id(p)][2]) / 1e6
    text = f'x{mean:.3f} (rate {rate:g}, {policy}' + (f': {own:.3f}' if own != rate else '') + ')'
    return round(mean, 3), text + (f'; {fresh:.2f} M at x1' if fresh >= 0.005 else '')


def config_facts(cfg: Config) -> dict[str, Any]:
    """The runner's sections of the config, flattened; `COVERED` keys left to the backbone's facts."""
    flat = flatten({k: cfg[k] for k in RUNTIME if k in cfg})
    return {k: v for k, v in flat.items() if not k.startswith(COVERED)}


def recipe_row(
    path: str,
    repo: str | Path,
    images: Tensor | None = None,
    measure: bool = True,
    measured: Mapping[str, dict[str, Any]] | None = None,
) -> Row:
    """Every fact of the recipe at `path` (module docstring); `images`: (N, 3, H, W) at the test size for a ranker.
    `measure=False`: without the `MEASURED` facts (no forward: the config's and the method's facts only). Its
    declared `MEASURED` values, `recipe['measured']`, are its entry in `measured` (default: `repo`'s table)."""
    cfg = Config.fromfile(path)
    recipe = (cfg.get('recipe') or {}).to_dict() if cfg.get('recipe') else {}
    if 'measured' in recipe:
        raise InputError(f'{path}: recipe.measured: the measured values of a recipe are in {MEASURED_TABLE}')
    table = measured_table(Path(repo) / MEASURED_TABLE) if measured is None else measured
    recipe['measured'] = dict(table.get(Path(path).stem) or {})
    args = cfg.model.backbone.to_dict()
    model = build_backbone(args)
    init = args.get('init_cfg') or {}
    has_weights = bool(init.get('checkpoint')) and Path(init['checkpoint']).is_file()
    if has_weights and measure:
        load_start(model, {**init, 'purpose': 'pretraining'})  # the card names its start: no warning here
    if measure:
        facts, cells = backbone_facts(cfg, model, images if has_weights else None)
        facts['lr_scale'], cells['lr_scale'] = lr_facts(cfg, model)
    else:
        facts, cells = method_facts(model), {}
    start, start_cells, notes = start_facts(init, repo)
    cells.update(
        start_cells, test_size='x'.join(map(str, test_size(cfg))), train_size='x'.join(map(str, train_size(cfg)))
    )
    return Row(path, Path(path).stem, {**config_facts(cfg), **facts, **start}, cells, recipe, notes)
