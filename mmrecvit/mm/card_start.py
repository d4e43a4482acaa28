"""Where a recipe's backbone starts, as facts a comparison checks (tools/analysis_tools/compare.py, issue 45).

A start is the checkpoint `init_cfg` loads and what made it: a public plain ViT (its paper's recipe and top-1), or
one of our recipes, named by `init_cfg.made_by` (`configs/cls/...` or `configs/distill/...`, its `--cfg-options`
applied). The facts (`start.*`, `pretraining.*`) are what a reader needs to weigh a start: the checkpoint, the recipe
that made it, where that recipe started, its epochs, warm-up, learning rate and batch, label mixing and loss (a
distillation: its teacher and the layers it matches). The top-1 is shown beside them, not compared: a measurement,
read from the checkpoint's meta (`mm/start_meta.py`) or its paper, "not measured" otherwise, said.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
from pathlib import Path
from typing import Any

from mmengine.config import Config, DictAction

from .start_meta import StartMetaError, read_start_meta

DEIT = dict(  # the DeiT paper's recipe (its Table 9: 300 epochs, 5 warm-up, lr 5e-4 x batch/512, batch 1024)
    epochs=300, warmup_epochs=5, lr=1e-3, batch=1024, mixup=True, loss='cross-entropy, label smoothing 0.1'
)
# The public plain-ViT checkpoints the recipes start from: name, top-1 on ImageNet-1k val (the DeiT paper's Table 1).
PUBLIC = {
    'deit_tiny_patch16_224-a1311bcf.pth': ('DeiT-Ti', 72.2),
    'deit_small_patch16_224-cd65a155.pth': ('DeiT-S', 79.8),
    'deit_base_patch16_224-b5f2ef4d.pth': ('DeiT-B', 81.8),
}
RELEASE = 'DeiT release'  # `start.made_by` of a public checkpoint (a backbone file's `paper_start` for PlainViT)


class StartError(ValueError):
    """A start that cannot be read (a made_by naming no recipe file, bad --cfg-options)."""


def made_by_recipe(made_by: str, repo: Path) -> tuple[str, Config] | None:
    """(the `configs/cls|distill/...py` a made_by command runs, with its `--cfg-options`; that recipe's config with
    them applied), None when the command runs none."""
    repo, words = Path(repo), shlex.split(made_by.split('&&')[0])
    recipe = next((w for w in words if re.fullmatch(r'configs/(cls|distill)/\S+\.py', w)), None)
    if recipe is None:
        return None
    if not (repo / recipe).is_file():
        raise StartError(f'made_by {made_by!r} runs {recipe}, which does not exist')
    cfg = Config.fromfile(str(repo / recipe))
    options = []
    if '--cfg-options' in words:
        rest = words[words.index('--cfg-options') + 1 :]
        options = rest[: next((i for i, w in enumerate(rest) if w.startswith('--')), len(rest))]
        parser = argparse.ArgumentParser(exit_on_error=False)
        parser.add_argument('--cfg-options', nargs='+', action=DictAction)
        try:
            cfg.merge_from_dict(parser.parse_args(['--cfg-options', *options]).cfg_options)
        except (argparse.ArgumentError, ValueError, KeyError) as e:
            raise StartError(f'made_by {made_by!r}: its --cfg-options cannot be applied ({e})') from e
    return ' '.join([recipe, *(['--cfg-options', *options] if options else [])]), cfg


def origin(init_cfg: dict | None) -> str:
    """Where a recipe's own backbone starts: 'scratch', a public checkpoint's name, else the checkpoint's file."""
    path = (init_cfg or {}).get('checkpoint')
    if path is None:
        return 'scratch'
    return PUBLIC.get(os.path.basename(path), (os.path.basename(path),))[0]


def pretraining_of(cfg: Config) -> dict[str, Any]:
    """The `pretraining.*` facts of a classification or distillation recipe."""
    warmup = next((s for s in cfg.param_scheduler if s['type'] == 'LinearLR'), {})
    facts = dict(
        epochs=cfg.train_cfg.get('max_epochs') or f'{cfg.train_cfg.get("max_iters")} iterations',
        warmup_epochs=warmup.get('end') if warmup.get('by_epoch', True) else f'{warmup.get("end")} iterations',
        lr=cfg.optim_wrapper.optimizer.lr,
        batch=(cfg.get('auto_scale_lr') or {}).get('base_batch_size'),
    )
    model = cfg.model
    if model.type == 'FeatureDistiller':
        layers = model.get('layers', 'final')
        return dict(
            facts,
            **{'from': 'the teacher' if model.get('init_from_teacher') else origin(model.backbone.get('init_cfg'))},
            mixup=False,
            loss=f'feature MSE to {model.teacher.name}, layers {layers}',
        )
    head_loss = model.head.get('loss', {})
    loss = 'cross-entropy' + (
        f', label smoothing {head_loss.label_smooth_val}' if head_loss.get('type') == 'LabelSmoothLoss' else ''
    )
    return dict(
        facts,
        **{'from': origin(model.backbone.get('init_cfg'))},
        mixup=bool((model.get('train_cfg') or {}).get('augments')),
        loss=('CCE: ' if model.type == 'ConfidenceScaledClassifier' else '') + loss,
    )


def start_facts(init_cfg: dict | None, repo: Path) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(facts, cells, notes) of a backbone's start: the facts compared (module docstring), the card's `start`,
    `top1` and `pretraining` cells, and lines about a start that cannot say its quality."""
    if not init_cfg or not init_cfg.get('checkpoint'):
        return {'start.checkpoint': 'random init'}, dict(start='random init', top1='–', pretraining='–'), []
    path = init_cfg['checkpoint']
    name = os.path.basename(path)
    facts: dict[str, Any] = {'start.checkpoint': name}
    notes: list[str] = []
    if name in PUBLIC:
        label, top1 = PUBLIC[name]
        facts['start.made_by'] = RELEASE
        facts.update({f'pretraining.{k}': v for k, v in dict(DEIT, **{'from': 'scratch'}).items()})
        cells = dict(start=f'{label} ({RELEASE})', top1=f'{top1} (DeiT paper)')
    else:
        found = made_by_recipe(init_cfg.get('made_by', ''), repo)
        if found is None:
            facts['start.made_by'] = '?'
            cells = dict(start=name, top1='not measured (made_by names no recipe)')
        else:
            recipe, cfg = found
            facts['start.made_by'] = recipe
            facts.update({f'pretraining.{k}': v for k, v in pretraining_of(cfg).items()})
            distilled = '/distill/' in recipe
            cells = dict(start=f'{"distilled" if distilled else "own IN-1k"}: {name}', top1=top1_cell(path, notes))
            if distilled:
                cells['top1'] = 'not measured (a distilled start has no classifier)'
    cells['pretraining'] = pretraining_cell(facts)
    return facts, cells, notes


def top1_cell(path: str, notes: list[str]) -> str:
    """The top-1 from the checkpoint's meta; 'not measured' with why (a file without meta: a note too)."""
    if not os.path.isfile(path):
        return 'not measured (file absent)'
    try:
        meta = read_start_meta(path)
    except StartMetaError as e:
        notes.append(str(e))
        return 'not measured (no meta)'
    if 'imagenet_top1' not in meta:
        notes.append(f"start checkpoint {path!r}: its meta has no 'imagenet_top1'")
        return 'not measured (no top-1 in its meta)'
    return f'{meta["imagenet_top1"]:.1f} ({meta.get("val_dataset", "?")}, {meta.get("val_images", "?")} images; meta)'


def pretraining_cell(facts: dict[str, Any]) -> str:
    if 'pretraining.epochs' not in facts:
        return '?'
    f = {k.split('.', 1)[1]: v for k, v in facts.items() if k.startswith('pretraining.')}
    return (
        f'from {f["from"]}, {f["epochs"]} ep., warm-up {f["warmup_epochs"]}, lr {f["lr"]:g} @ batch {f["batch"]}, '
        f'{"Mixup/CutMix, " if f["mixup"] else ""}{f["loss"]}'
    )
