"""A card of recipes a reviewer can check: every fact of each recipe beside the reference's, every difference declared.

    python tools/analysis_tools/compare.py REFERENCE RECIPE... [--check] [--out docs/comparison.md --title TITLE]
    python tools/analysis_tools/compare.py REFERENCE RECIPE... --suggest   # the declarations the recipes lack
    python tools/analysis_tools/compare.py ... --images data/coco/val2017 --num-images 16   # a ranker's mean work

Each recipe (an mmdet / mmseg / mmpretrain config; the first is the reference) is read as its whole resolved config,
flattened, plus the facts of the backbone it builds and of its start (`mmrecvit/mm/card.py`, `card_start.py`): model,
data and pipelines, optimizer and schedulers, hooks, AMP, seeds; params, GFLOPs per test image (ours and the papers'
convention), training GFLOPs per image (forward + backward + with_cp's recomputation), global steps, feature layers,
final norm, eval knobs, the mean lr scale under the layer decay; the start, what made it and how. Every fact where a
recipe differs from the reference must be declared in its `recipe` data with the value it has
(`mmrecvit/mm/card_check.py`: `differs = {key: (value, why)}`; a task-dependent value, one of `MEASURED`, in the table
configs/measured.yml under the recipe's file name, or `--measured` another), so a changed value fails; `--check` exits
1 on anything undeclared, declared with another value, declared but not differing (stale), a start that is not its
paper's undeclared, or a start file that cannot say its top-1.

The card (Markdown, on stdout) has one column per recipe and one line per property, a cell in bold where it differs
from the reference's, then each recipe's declared differences and what is wrong. `--out FILE --title TITLE` writes
it into FILE, replacing the card of that title (the tool writes nothing else: no data, no cache). A ranker's GFLOPs
(Edge-RecViT) need its trained weights and images: with both (`--images`), the mean over the first `--num-images`
images of that folder at the test size; else the full depth, said.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from mmengine.config import Config

from mmrecvit.inputs import InputError, bad_input, config_file, existing_file, tool_parser
from mmrecvit.mm.card import MEASURED, MEASURED_TABLE, Row, measured_table, recipe_row, table_line, test_size
from mmrecvit.mm.card_check import Finding, check
from mmrecvit.mm.card_start import StartError
from mmrecvit.mm.complexity import markdown_table

REPO = Path(__file__).resolve().parents[2]  # made_by's recipes are relative to it, wherever the config is
IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp')
METHODS = ('plainvit', 'naiverecvit', 'srvit', 'revit', 'edgerecvit', 'morvit')
DET, SEG = (
    'configs/det/mask-rcnn_{}_vitdet-fpn_16xb4-amp-lsj-100e_coco.py',
    'configs/seg/upernet_{}_8xb2-{}_ade20k-512x512.py',
)
LD = 'amp-ld0.95-160k'
# The cards of docs/comparison.md (`--cards`): title -> recipes, the reference first.
CARDS = {
    'ViTDet-S': [DET.format(f'{m}-s') for m in METHODS],
    'ADE20K, UperNet 160k (mmseg)': [SEG.format(f'{m}-s', '160k') for m in METHODS],
    'ADE20K, UperNet 160k, layer decay 0.95 (ViT-Adapter)': [SEG.format(f'{m}-s', LD) for m in METHODS],
    'ViTDet-B': [DET.format(f'{m}-b') for m in METHODS],
    'ADE20K-B, UperNet 160k, layer decay 0.95': [SEG.format(f'{m}-b', LD) for m in METHODS],
    'Equal budget: ViTDet-S': [
        DET.format(m)
        for m in ('plainvit-s-in1k', 'naiverecvit-s', 'srvit-s', 'revit-s', 'edgerecvit-s-scratch', 'morvit-s')
    ],
    'References: ViTDet-S': [DET.format(m) for m in ('plainvit-s', 'plainvit-b', 'srvit-s', 'plainvit-ti')]
    + [DET.format(f'{m}-s') for m in METHODS[1:] if m != 'srvit'],
    'References: ADE20K, layer decay 0.95': [
        SEG.format(m, LD) for m in ('plainvit-s', 'plainvit-b', 'srvit-s', 'plainvit-ti')
    ]
    + [SEG.format(f'{m}-s', LD) for m in METHODS[1:] if m != 'srvit'],
    'Ablations: ViTDet-S': [DET.format('plainvit-s')]
    + [
        DET.format(m)
        for pair in (
            ('srvit-s', 'srvit-s-final'),
            ('revit-s', 'revit-s-e1'),
            ('edgerecvit-s', 'edgerecvit-s-full'),
            ('morvit-s', 'morvit-s-full'),
        )
        for m in pair
    ],
}


def view(row: Row) -> dict[str, str]:
    """What the card shows of a row, property by property, from its facts."""
    f, c = row.facts, row.cells
    get = lambda key, default='–': f.get(key, default)  # noqa: E731
    warmup = get('param_scheduler.LinearLR.end', None)
    hook = 'custom_hooks.TemperatureScheduleHook.'
    tau = (
        f'{get(hook + "start")} -> {get(hook + "end")} ({get(hook + "schedule", "cosine")})'
        if hook + 'type' in f
        else '–'
    )
    repeat = (
        get('train_dataloader.dataset.times', 1) if get('train_dataloader.dataset.type', '') == 'RepeatDataset' else 1
    )
    epochs = get('train_cfg.max_epochs', None)
    window = get('model.backbone.window_size', 0)
    return {
        'params (M)': f'{f["params"]:.2f}',
        "GFLOPs per test image, ours / papers'": f'{f["gflops"]:g} / {f["gflops_paper"]:g}'
        + (f' ({c["work_note"]})' if c.get('work_note') else ''),
        'training GFLOPs per image': f'{f["train_gflops"]:g}',
        'train / test size': f'{c["train_size"]} / {c["test_size"]}',
        'start': c['start'],
        'its ImageNet-1k top-1': c['top1'],
        'what made it': f'{Path(get("start.made_by", "–")).name}: {c["pretraining"]}',
        'feature layers': f['feature_layers'],
        'final norm': 'yes' if f['final_norm'] else 'no',
        'attention': f'{window}x{window} windows' if window else 'global',
        'global steps at test': c['global_steps'] or f['global_steps'],
        'lr scale (layer decay)': c['lr_scale'],
        'optimizer, lr, weight decay': f'{get("optim_wrapper.optimizer.type")} {get("optim_wrapper.optimizer.lr")}, '
        f'{get("optim_wrapper.optimizer.weight_decay")}',
        'warm-up': '–'
        if warmup is None
        else f'{warmup} ' + ('iter.' if not get('param_scheduler.LinearLR.by_epoch', True) else 'ep.'),
        'drop path; step drop': f'{get("model.backbone.drop_path_rate", 0.0)}; {get("model.backbone.step_drop_rate")}',
        'eval knobs': f['eval_knobs'],
        'tau schedule': tau,
        'AMP': amp_of(f),
        'schedule': f'{epochs * repeat} epochs' if epochs else f'{get("train_cfg.max_iters")} iterations',
        'batch per GPU (total)': f'{get("train_dataloader.batch_size")} ({get("auto_scale_lr.base_batch_size")})',
        'seed; runs': f'{get("randomness.seed")}'
        + (' per rank' if get('randomness.diff_rank_seed', False) else '')
        + f'; {row.recipe.get("runs", 1)}',
    }


def shown(path: str) -> str:
    """A path as the card shows it: relative to the repository where it is inside."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(REPO)) if resolved.is_relative_to(REPO) else path


def amp_of(facts: dict[str, Any]) -> str:
    if facts.get('optim_wrapper.type') != 'AmpOptimWrapper':
        return 'fp32'
    return facts.get('optim_wrapper.dtype') or 'fp16'  # mmengine's default autocast dtype


def labels(rows: Sequence[Row]) -> list[str]:
    """Short column names: the file names without what all of them share at both ends."""
    names = [r.name for r in rows]
    head = len(_common([n.split('_') for n in names]))
    tail = len(_common([n.split('_')[::-1] for n in names]))
    return ['_'.join(n.split('_')[head : len(n.split('_')) - tail]) or n for n in names]


def _common(parts: list[list[str]]) -> list[str]:
    out = []
    for words in zip(*parts):
        if len(set(words)) > 1:
            break
        out.append(words[0])
    return out[: min(len(p) for p in parts) - 1]


def render(rows: Sequence[Row], findings: Sequence[Finding], title: str | None) -> str:
    names, views = labels(rows), [view(r) for r in rows]
    short = dict(zip([r.name for r in rows], names))
    body = []
    for prop in views[0]:
        cells = [v[prop] for v in views]
        mark = ' ≠' if len(set(cells)) > 1 else ''
        body.append([prop + mark] + [c if i == 0 or c == cells[0] else f'**{c}**' for i, c in enumerate(cells)])
    out = [f'### {title}', ''] if title else []
    out += [f'Reference: {names[0]}; bold: differs from it; ≠: the recipes differ. Recipes: '
            + '; '.join(f'{n} = `{shown(r.path)}`' for n, r in zip(names, rows)) + '.', '']  # fmt: skip
    out += markdown_table(['', *names], body, 'l' * (len(rows) + 1))
    declared = [f for f in findings if f.kind == 'declared']
    if declared:
        out += ['', 'Declared differences (`recipe.differs`, key = value: why):', '']
        out += [f'- {short[f.recipe]}: `{f.key}` = {f.value!r}: {f.text}' for f in declared]
    wrong = [f for f in findings if f.kind != 'declared']
    if wrong or any(r.notes for r in rows):
        out += ['', 'NOT AS DECLARED:', '']
        out += [f'- {f.kind}: {short.get(f.recipe, f.recipe)}: `{f.key}` = {f.value!r}: {f.text}' for f in wrong]
        out += [f'- NO MEASURED TOP-1: {short[r.name]}: {note}' for r in rows for note in r.notes]
    return '\n'.join(out) + '\n'


def suggest(rows: Sequence[Row], findings: Sequence[Finding]) -> str:
    """The `differs` entries and the measured table's lines that would make each recipe's declarations true (to edit,
    not paste blindly: each why is the author's)."""
    out = []
    for row in rows[1:]:
        todo = [f for f in findings if f.recipe == row.name and f.kind in ('NOT DECLARED', 'WRONG VALUE', 'NO VALUE')]
        stale = [f.key for f in findings if f.recipe == row.name and f.kind == 'STALE']
        if not (todo or stale):
            continue
        out.append(f'# {row.path}')
        measured = {f.key: f.value for f in todo if f.key in MEASURED}
        differs = {f.key: (f.value, 'WHY') for f in todo if f.key not in MEASURED}
        differs.update({k: 'WHY' for k in measured if k not in (row.recipe.get('differs') or {})})
        differs.update({k: None for k in stale})
        if differs:
            out.append(f'differs={differs!r},')
        if measured or set(stale) & set(row.recipe['measured']):
            line = {k: v for k, v in {**row.recipe['measured'], **measured}.items() if k not in stale}
            out.append(f'# its line in {MEASURED_TABLE}:\n{table_line(row.name, line)}')
    return '\n'.join(out) + '\n' if out else '# every difference is declared with its value\n'


def load_images(folder: str, count: int, size: tuple[int, int], cfg_path: str) -> torch.Tensor:
    """The first `count` images of `folder` (sorted), resized to `size` and normalised as the recipe's data
    preprocessor does: (count, 3, H, W)."""
    import mmcv

    files = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)[:count]
    if len(files) < count:
        raise InputError(f'--images {folder!r}: {len(files)} images, --num-images asks for {count}')
    pre = Config.fromfile(cfg_path).model.data_preprocessor
    mean, std = torch.tensor(pre.mean).view(3, 1, 1), torch.tensor(pre.std).view(3, 1, 1)
    images = [mmcv.imresize(mmcv.imread(str(p), channel_order='rgb'), (size[1], size[0])) for p in files]
    return torch.stack([(torch.from_numpy(i).permute(2, 0, 1).float() - mean) / std for i in images])


def write_card(path: str, title: str, card: str) -> None:
    """Put `card` into the file at `path` between its markers, replacing the card of the same title, else appended."""
    begin, end = f'<!-- card: {title} -->', '<!-- /card -->'
    text = Path(path).read_text() if Path(path).is_file() else ''
    block = f'{begin}\n{card}{end}\n'
    found = re.search(re.escape(begin) + r'.*?' + re.escape(end) + r'\n?', text, re.S)
    text = text[: found.start()] + block + text[found.end() :] if found else text + ('\n' if text else '') + block
    Path(path).write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = tool_parser('tools/analysis_tools/compare.py', __doc__)
    parser.add_argument('configs', nargs='*', help='the recipes of a family; the first is the reference')
    parser.add_argument(
        '--cards', action='store_true', help='every card of docs/comparison.md (CARDS), each under its title'
    )
    parser.add_argument('--check', action='store_true', help='exit 1 on anything not as declared')
    parser.add_argument('--suggest', action='store_true', help='print the declarations the recipes lack')
    parser.add_argument('--out', default=None, help='write the card into this file (replacing the card of --title)')
    parser.add_argument('--title', default=None, help="the card's heading (needed with --out)")
    parser.add_argument('--images', default=None, help="a folder of images for a ranker's mean work")
    parser.add_argument('--num-images', type=int, default=16, help='how many of --images (default 16)')
    parser.add_argument(
        '--measured',
        default=str(REPO / MEASURED_TABLE),
        help=f'the measured values declared (default {MEASURED_TABLE})',
    )
    args = parser.parse_args(argv)
    if args.cards == bool(args.configs):
        parser.error('give the recipes of one family (two or more) or --cards, one of them')
    if args.configs and len(args.configs) < 2:
        parser.error(f'compare needs two recipes or more (a reference and one to compare), got {args.configs}')
    if args.out and not (args.title or args.cards):
        parser.error('--out needs --title: the card it replaces in the file')
    families = {title: [str(REPO / p) for p in paths] for title, paths in CARDS.items()} if args.cards else None
    families = families or {args.title: args.configs}
    with bad_input('tools/analysis_tools/compare.py'):
        table = measured_table(existing_file(args.measured, '--measured'))
    status, done = 0, {}  # a recipe in several cards is measured once: its row by path
    for title, configs in families.items():
        status = max(status, one_card(configs, title, args, done, table))
    return status


def one_card(configs: Sequence[str], title: str | None, args: argparse.Namespace, done: dict, table: dict) -> int:
    """Print (or write) the card of one family; 1 if --check finds anything not as declared."""
    with bad_input('tools/analysis_tools/compare.py'):
        paths = [config_file(p) for p in configs]
        if args.images is not None and not Path(args.images).is_dir():
            raise InputError(f'--images {args.images!r}: no such folder')
        rows = []
        for path in paths:
            if path not in done:
                images = None
                if args.images is not None:
                    images = load_images(args.images, args.num_images, test_size(Config.fromfile(path)), path)
                try:
                    done[path] = recipe_row(path, REPO, images, measured=table)
                except StartError as e:
                    raise InputError(f'{path}: {e}') from e
            rows.append(done[path])
    findings = check(rows)
    card = render(rows, findings, title)
    print(suggest(rows, findings) if args.suggest else card, end='')
    if args.out:
        write_card(args.out, title, card)
    bad = any(f.kind != 'declared' for f in findings) or any(r.notes for r in rows)
    return 1 if args.check and bad else 0


if __name__ == '__main__':
    sys.exit(main())
