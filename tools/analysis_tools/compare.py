"""One table of what makes a comparison of recipes fair or not, and a check that every difference is declared.

    python tools/analysis_tools/compare.py configs/seg/upernet_{plainvit,srvit,revit}-s_8xb2-160k_ade20k-512x512.py
    python tools/analysis_tools/compare.py CONFIG... --check     # exit 1 on a difference no recipe declares
    python tools/analysis_tools/compare.py CONFIG... --out docs/comparison.md --title 'ViTDet-S'

One row per recipe (mmdet / mmseg / mmpretrain configs), read from the config and the backbone it builds:
* params: the backbone's; GFLOPs: the backbone's at the test size (one test image: ViTDet's 1024x1024 pad, one
  512x512 sliding window, the crop), ours (`mmrecvit/models/flops.py`: 2 x MACs of every product the forward runs,
  the method's own work included) and the papers' convention (the blocks as they run and the patch embedding,
  without the method's own work: rankers, routers, step transforms, expert merges, the key/value re-projection of
  exited tokens; linear in depth: docs/methods/edge_recvit.md reproduces Edge-RecViT's 24.39 with it); a ranker's
  depths need its trained weights: the start's where its file is here, else the full depth (said);
* start: the checkpoint `init_cfg` loads, and its init distance: the cosine of the model's last map to the function
  of the weights it loads at the start (1: its own weights; a plain ViT's: measured as
  tools/analysis_tools/init_distance.py does, on the real file if here, else on timm's random stand-in, said);
* pretraining: what made the start (a public checkpoint's, or the configs/cls recipe its `made_by` runs);
* window layout, and the global-attention steps the built model runs at the test grid (its plan);
* layer decay, drop path, schedule (epochs or iterations), batch.

A column where the recipes differ is marked with a `≠` in its header, and each cell that differs from the first
recipe's (the reference: name PlainViT's first) is in bold. A difference is declared in the recipe data beside
recipe_diff's `intended`: `recipe.differs = {column pattern: why}`, fnmatch-style over the column keys (`start*`: the
start, its init distance and its pretraining; a method's own from its backbone file's
`backbone_recipe`, configs/_base_/backbones/); `--check` exits 1 on a cell that differs from the reference in a
column its recipe does not declare, and lists the declared ones below the table either way.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from mmengine.config import Config

from mmrecvit.inputs import tool_parser
from mmrecvit.mm.complexity import markdown_table
from mmrecvit.models import BACKBONES
from mmrecvit.models.checkpoint import load_state_dict_into, read_checkpoint
from mmrecvit.models.flops import BlockWork
from mmrecvit.models.start import is_plain_vit_checkpoint, load_start, represents_plain_vit
from mmrecvit.models.windows import Windows

sys.path.insert(0, str(Path(__file__).resolve().parent))
import init_distance  # noqa: E402  (tools/analysis_tools/init_distance.py: the same measurement)

COLUMNS = {  # key -> header
    'params': 'params (M)',
    'gflops': 'GFLOPs, ours',
    'gflops_paper': 'GFLOPs, papers',
    'start': 'start',
    'start_distance': 'init distance',
    'start_pretraining': 'pretraining',
    'layout': 'window layout',
    'global_steps': 'global steps at test',
    'layer_decay': 'layer decay',
    'drop_path': 'drop path',
    'schedule': 'schedule',
    'batch': 'batch',
}
REPO = Path(__file__).resolve().parents[2]  # made_by's recipes are relative to it, wherever the config is
DATA = REPO / 'data'  # the toy images (written there if absent)
# The public plain-ViT checkpoints the recipes start from: what made them.
PUBLIC = {
    'deit_small_patch16_224-cd65a155.pth': ('DeiT-S', 'IN-1k 300 ep. (DeiT)', 'vit_small_patch16_224'),
    'deit_base_patch16_224-b5f2ef4d.pth': ('DeiT-B', 'IN-1k 300 ep. (DeiT)', 'vit_base_patch16_224'),
}


def build_backbone(args: dict) -> torch.nn.Module:
    args = {k: v for k, v in args.items() if k not in ('_delete_', 'init_cfg', 'pretrained', 'with_cp')}
    return BACKBONES[args.pop('type')](**args).eval()


def test_size(cfg: Config) -> tuple[int, int]:
    """The test input of one square image: a sliding window's crop, else the test pipeline's pad size, or its resize
    (keep_ratio: a square image is resized to the scale's short side, mmseg's (2048, 512) -> 512x512, mmdet's
    (1333, 800) -> 800x800; else to the scale itself)."""
    test_cfg = cfg.model.get('test_cfg') or {}
    if test_cfg.get('mode') == 'slide':
        return tuple(test_cfg['crop_size'])
    steps = {t['type']: t for t in cfg.test_dataloader.dataset.pipeline}
    for name, key in (('Pad', 'size'), ('Resize', 'scale'), ('RandomResizedCrop', 'scale'), ('ResizeEdge', 'scale')):
        if name in steps and steps[name].get(key):
            size = steps[name][key]
            if isinstance(size, int):
                return size, size
            if name == 'Resize' and steps[name].get('keep_ratio'):
                return min(size), min(size)
            return size[1], size[0]  # OpenMMLab's scales are (w, h)
    raise ValueError(f'{cfg.filename}: no test size in its test pipeline or a sliding-window test_cfg')


@torch.no_grad()
def flops_at(model: torch.nn.Module, size: tuple[int, int], weights_here: bool) -> tuple[float, float, list, str]:
    """(GFLOPs ours, GFLOPs by the papers' convention, the steps run, a note) of one test image, from the forward's
    own record (its `stats`: the plan it ran and the work outside it); for a ranker without its trained weights,
    the full-depth plan instead."""
    grid = (math.ceil(size[0] / model.patch_size), math.ceil(size[1] / model.patch_size))
    note = ''
    if type(model).__name__ == 'EdgeRecViT' and not weights_here:
        plan = model.plan(None, grid)
        work = [model.embed_work(grid), *plan.work()]
        note = ' (full depth: the ranker decides)'
    else:  # a toy image where a ranker or router reads it, else zeros (the work does not depend on them)
        routed = weights_here and size[0] == size[1]
        stats = model(init_distance.toy_images(1, size[0], DATA) if routed else torch.zeros(1, 3, *size)).stats
        plan, work = stats.plan, stats.work
    # the papers': the blocks as they run and the patch embedding, without the method's own work
    paper = [w for w in work if getattr(w, 'name', None) == 'patch_embed']
    paper += [dataclasses.replace(w, new_kv=0.0) for w in work if isinstance(w, BlockWork)]
    return sum(w.flops for w in work) / 1e9, sum(w.flops for w in paper) / 1e9, list(plan.steps), note


def start_of(cfg: Config, model: torch.nn.Module, args: dict, images: int) -> tuple[str, str, str]:
    """(start, init distance, pretraining) of the backbone's init_cfg."""
    init = args.get('init_cfg') or {}
    path = init.get('checkpoint')
    if path is None:
        return 'random init', '–', '–'
    name = Path(path).name
    if name in PUBLIC:
        label, pretraining, stand_in = PUBLIC[name]
        here = Path(path).is_file()
        sd = read_checkpoint(path) if here else init_distance.load_source(f'timm:{stand_in}', 0)
        return label, f'{plain_vit_distance(args, sd, images):.4f}' + ('' if here else ' (stand-in)'), pretraining
    made_by = init.get('made_by', '')
    recipe = re.search(r'configs/cls/\S+\.py', made_by)
    if Path(path).is_file() and is_plain_vit_checkpoint(path) and not represents_plain_vit(model):
        return name, 'a plain ViT it cannot represent', '?'
    if recipe is None:
        return name, '1 (its own)' if Path(path).is_file() else '?', '?'
    cls_cfg = Config.fromfile(str(REPO / recipe.group(0)))
    base = (cls_cfg.model.backbone.get('init_cfg') or {}).get('checkpoint')
    epochs = cls_cfg.train_cfg.get('max_epochs')
    origin = f'{PUBLIC[Path(base).name][0]} + ' if base and Path(base).name in PUBLIC else 'from scratch, '
    return f'own IN-1k ({Path(recipe.group(0)).name})', '1 (its own)', f'{origin}IN-1k {epochs} ep.'


@torch.no_grad()
def plain_vit_distance(args: dict, sd: dict, images: int) -> float:
    """The cosine of the backbone's last map (built from `args`, loaded from a plain ViT's state dict) to that ViT's,
    as init_distance.py measures it (at the ViT's size, global attention: its function)."""
    arch = init_distance.timm_architecture(sd)
    heads = max(1, arch['embed_dim'] // 64)
    x = init_distance.toy_images(images, arch['img_size'], DATA)
    ref = init_distance.timm_vit(sd, heads)
    fresh = build_backbone({**args, 'window_size': 0, 'use_rel_pos': False})
    load_state_dict_into(fresh, sd, 'the plain ViT')
    normed = not isinstance(fresh.norm, torch.nn.Identity)
    if normed:
        target = ref.forward_features(x)[:, ref.num_prefix_tokens :]
        target = target.transpose(1, 2).reshape(x.shape[0], -1, *fresh.patch_grid(x))
    else:
        target = ref.forward_intermediates(x, indices=[arch['depth'] - 1], intermediates_only=True)[-1]
    return init_distance.distance(fresh(x)[-1], target)[0]


def layout_of(args: dict, steps: list[Any]) -> tuple[str, str]:
    windowed = [s for s in steps if isinstance(s.windows, Windows)]
    if not windowed:
        return 'global', f'all {len(steps)}'
    glob_steps = [s.index for s in steps if not isinstance(s.windows, Windows)]
    return (
        f'{args["window_size"]}x{args["window_size"]} windows',
        f'{len(glob_steps)} of {len(steps)} ({", ".join(map(str, glob_steps))})',
    )


def schedule_of(cfg: Config) -> str:
    train = cfg.train_cfg
    if train.get('max_iters'):
        return f'{train["max_iters"]} iterations'
    times = (
        cfg.train_dataloader.dataset.get('times', 1)
        if cfg.train_dataloader.dataset.get('type') == 'RepeatDataset'
        else 1
    )
    return f'{train["max_epochs"] * times} epochs'


def batch_of(cfg: Config) -> str:
    if cfg.get('auto_scale_lr', {}).get('base_batch_size'):
        return str(cfg.auto_scale_lr.base_batch_size)
    found = re.search(r'_(\d+)xb(\d+)', Path(cfg.filename).name)
    return str(int(found.group(1)) * int(found.group(2))) if found else str(cfg.train_dataloader.batch_size)


def row_of(path: str, images: int = 4) -> dict[str, Any]:
    cfg = Config.fromfile(path)
    args = cfg.model.backbone.to_dict()
    model = build_backbone(args)
    h, w = test_size(cfg)
    start = (args.get('init_cfg') or {}).get('checkpoint')
    weights_here = bool(start) and Path(start).is_file()
    if weights_here:
        load_start(model, args['init_cfg'])
    gflops, gflops_paper, steps, note = flops_at(model, (h, w), weights_here)
    layout, global_steps = layout_of(args, steps)
    start, distance, pretraining = start_of(cfg, model, args, images)
    paramwise = cfg.optim_wrapper.get('paramwise_cfg') or {}
    decay = paramwise.get('layer_decay_rate') if cfg.optim_wrapper.get('constructor') else None
    cells = {
        'params': f'{sum(p.numel() for p in model.parameters()) / 1e6:.2f}',
        'gflops': f'{gflops:.{1 if gflops >= 10 else 2}f}{note}',
        'gflops_paper': f'{gflops_paper:.{1 if gflops_paper >= 10 else 2}f}',
        'start': start,
        'start_distance': distance,
        'start_pretraining': pretraining,
        'layout': layout,
        'global_steps': global_steps,
        'layer_decay': '–' if decay is None else str(decay),
        'drop_path': str(args.get('drop_path_rate', 0.0)),
        'schedule': schedule_of(cfg),
        'batch': batch_of(cfg),
    }
    recipe = cfg.get('recipe') or {}
    return dict(
        path=path,
        name=Path(path).stem,
        method=type(model).__name__,
        size=f'{h}x{w}',
        cells=cells,
        differs=dict(recipe.get('differs') or {}),
    )


def compare(rows: Sequence[dict]) -> tuple[set[str], list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(columns that differ, undeclared (recipe, column, cell), declared (recipe, column, why)) vs the first row."""
    ref = rows[0]['cells']
    differing = {c for c in COLUMNS if len({r['cells'][c] for r in rows}) > 1}
    undeclared, declared = [], []
    for r in rows[1:]:
        for c in sorted(differing, key=list(COLUMNS).index):
            if r['cells'][c] == ref[c]:
                continue
            why = next((w for p, w in r['differs'].items() if fnmatch.fnmatchcase(c, p)), None)
            (declared if why else undeclared).append((r['name'], c, why or r['cells'][c]))
    return differing, undeclared, declared


def render(rows: Sequence[dict], title: str | None = None) -> str:
    differing, undeclared, declared = compare(rows)
    header = ['recipe'] + [COLUMNS[c] + (' ≠' if c in differing else '') for c in COLUMNS]
    ref = rows[0]['cells']
    body = [
        [r['name']]
        + [f'**{r["cells"][c]}**' if r is not rows[0] and r['cells'][c] != ref[c] else r['cells'][c] for c in COLUMNS]
        for r in rows
    ]
    out = [
        f'### {title}\n' if title else '',
        f'Test size {rows[0]["size"]}; ≠: the recipes differ; bold: differs from {rows[0]["name"]}.\n',
    ]
    out += markdown_table(header, body, 'l' + 'r' * 3 + 'l' * (len(COLUMNS) - 3))
    if declared:
        out += ['', 'Declared differences (`recipe.differs`):', '']
        out += [f'- {name}, {COLUMNS[c]}: {why}' for name, c, why in declared]
    if undeclared:
        out += ['', 'NOT DECLARED:', '']
        out += [f'- {name}, {COLUMNS[c]}: {cell} (the reference: {ref[c]})' for name, c, cell in undeclared]
    return '\n'.join(out) + '\n'


def main(argv: Sequence[str] | None = None) -> int:
    parser = tool_parser('tools/analysis_tools/compare.py', __doc__)
    parser.add_argument('configs', nargs='+', help='recipes to compare (the first is the reference: PlainViT)')
    parser.add_argument('--check', action='store_true', help='exit 1 if a difference is not declared by its recipe')
    parser.add_argument('--out', default=None, help='also append the Markdown table to this file')
    parser.add_argument('--title', default=None, help="the table's heading")
    parser.add_argument('--images', type=int, default=4, help='toy images for the init distance (default 4)')
    args = parser.parse_args(argv)
    if len(args.configs) < 2:
        parser.error('compare needs two recipes or more')
    for path in args.configs:
        if not Path(path).is_file():
            parser.error(f'no such config: {path}')
    torch.manual_seed(0)
    rows = [row_of(p, args.images) for p in args.configs]
    table = render(rows, args.title)
    print(table, end='')
    if args.out:
        with open(args.out, 'a') as f:
            f.write(table + '\n')
    _, undeclared, _ = compare(rows)
    return 1 if args.check and undeclared else 0


if __name__ == '__main__':
    sys.exit(main())
