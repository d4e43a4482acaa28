"""Dry run of a recipe at its real sizes: one training and one test iteration, measured; and the cost tables.

    python tools/analysis_tools/dry_run.py configs/det/mask-rcnn_plainvit-s_vitdet-fpn_16xb4-amp-lsj-100e_coco.py
    python tools/analysis_tools/dry_run.py CONFIG --batch 1 --repeats 3 --with-cp both
    python tools/analysis_tools/dry_run.py --all --batch 1 --with-cp both --cache work_dirs/dry_run.jsonl \\
        --out docs/dry_run.md --costs docs/costs.md [--gpu-rate 150]
    python tools/analysis_tools/dry_run.py --from-cache work_dirs/dry_run.jsonl --costs docs/costs.md --gpu-rate 150

The recipe is built as written (model at its real size, its pipeline, data preprocessor, optimizer wrapper and
constructor; random weights) and its dataset replaced by synthetic images of the dataset's typical size with
random boxes/masks/segmentation maps/labels, sent through the recipe's own train and test pipelines, so the model
gets the recipe's input sizes (mmrecvit/benchmark/dry_run_mm.py). Printed per iteration: wall time (median of --repeats,
nothing instrumented), peak memory per image and the activations saved for the backward per image (tensors
allocated during the iteration: parameters and optimizer state not counted; CUDA allocator or tensor bookkeeping
on the CPU), and the FLOPs it executed (torch's FlopCounterMode, 2 x MACs; training: forward + backward + the
recomputation with_cp adds). AMP recipes run in fp32 on the CPU.

A detectron2 LazyConfig (configs/d2/) is dry-run the same way with detectron2's own parts: its mappers (LSJ),
model, optimizer and trainer step (mmrecvit/benchmark/dry_run_d2.py); --cfg-options are then its overrides.

--all measures every recipe (configs/det, seg, cls, d2; toys, _base_ and common excluded), appending each to
--cache as it finishes (a rerun skips what the cache holds), and rewrites --out (the dry-run table) and --costs
(per recipe: training GFLOPs per image, total PFLOPs of the schedule, activation memory per image with and
without with_cp, GPU hours at --gpu-rate) after each. --from-cache only rewrites the tables.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mmrecvit.benchmark.dry_run import DryRunOptions
from mmrecvit.benchmark.machine import cpu_model, mmrecvit_version, physical_cores
from mmrecvit.inputs import bad_input, config_file, tool_parser
from mmrecvit.mm.costs import DEFAULT_GPU_RATE, GPU_RATE_ASSUMPTION, cost_table, dry_run_table
from mmrecvit.mm.tooling import add_cfg_options

REPO = Path(__file__).resolve().parents[2]  # the checkout of this tool: its configs/ and its commit

FAMILIES = (  # (name, how a recipe file name shows it), in table order; the first match names the family
    ('mmdet ViTDet Cascade Mask R-CNN (LSJ 1024, 100 epochs)', ('cascade-mask-rcnn', 'vitdet')),
    ('mmdet ViTDet Mask R-CNN (LSJ 1024, 100 epochs)', ('mask-rcnn', 'vitdet')),
    ('detectron2 ViTDet Cascade Mask R-CNN (LSJ 1024, 100 epochs)', ('cascade_mask_rcnn', '100ep')),
    ('detectron2 ViTDet Mask R-CNN (LSJ 1024, 100 epochs)', ('mask_rcnn', '100ep')),
    ('mmdet Mask R-CNN FPN 1x', ('fpn_1x',)),
    ('mmdet Mask R-CNN FPN 3x (multi-scale crop)', ('ms-crop-3x',)),
    ('mmseg UperNet 160k, layer decay 0.95', ('upernet', 'ld0.95')),
    ('mmseg UperNet 160k', ('upernet', '160k')),
    ('mmpretrain ImageNet fine-tune from DeiT', ('deit-pre',)),
    ('mmpretrain ImageNet from scratch (DeiT recipe)', ('_in1k',)),
)
WITH_CP = ('as-written', 'on', 'off', 'both')
COST_NOTES = [
    'Per paper recipe, from its dry run at batch 1 on random weights (docs/dry_run.md has the iterations themselves):',
    '',
    "- **train GFLOPs/img**: what one training iteration executed per image at the recipe's training input (forward, "
    "backward and, as written, with_cp's recomputed backbone forward; 2 x MACs of matmuls, convolutions and "
    "attention, counted by torch's FlopCounterMode; norms and elementwise work not counted). The heads' share "
    'depends a little on how many random proposals match the random boxes; the multi-scale 3x recipe is at the one '
    'random scale its pipeline drew (the input column).',
    '- **PFLOPs**: that x the images the schedule trains on, with the dataset sizes COCO train2017 118287, ADE20K '
    'train 20210, ImageNet-1k train 1281167 (epochs x size; iteration schedules: iterations x batch).',
    '- **act. MiB/img**: fp32 tensors alive when the backward begins (what autograd keeps, plus the batch), per '
    'image, with activation checkpointing off and on (every backbone supports with_cp; the ViTDet recipes have it on). '
    "– where not measured: SR-ViT-B's ViTDet recipe without checkpointing outgrew the 24 GiB of the machine "
    "that made this table (killed; SR-ViT-S's keeps 10.2 GiB per image, ViT-B about 1.7x ViT-S).",
    "- detectron2 LazyConfigs (configs/d2/): their ViTDet models run by detectron2's own trainer step "
    '(mmrecvit/benchmark/dry_run_d2.py); their schedule is 184375 iterations of 64 images (99.8 COCO epochs).',
    '',
]


def family(path: str | Path, strict: bool = True) -> str:
    """The paper-recipe family of a config file name (not strict: 'other configs' for the rest)."""
    name = Path(path).name
    for fam, marks in FAMILIES:
        if all(m in name for m in marks) and 'toy' not in name:
            return fam
    if not strict:
        return 'other configs'
    raise ValueError(f'{name}: not a paper recipe (no family of {[f for f, _ in FAMILIES]})')


METHODS = ('plainvit', 'naiverecvit', 'srvit', 'revit', 'edgerecvit', 'morvit')


def recipes(repo: Path = REPO) -> list[Path]:
    """Every paper recipe of every method: ViT-S before ViT-B, then one method at a time over all families
    (a partial --all run covers every family first), then reViT's elastic variants."""
    found = [
        p
        for d in ('det', 'seg', 'cls', 'd2')
        for p in sorted((repo / 'configs' / d).glob('*.py'))
        if 'toy' not in p.name
    ]
    order = [f for f, _ in FAMILIES]

    def key(p: Path) -> tuple:
        method = next((i for i, m in enumerate(METHODS) if f'{m}-' in p.name or f'_{m}' in p.name), len(METHODS))
        return ('-b_' in p.name or '-b-' in p.name, 'elastic' in p.name, method, order.index(family(p)), p.name)

    return sorted(found, key=key)


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser('tools/analysis_tools/dry_run.py', __doc__)
    parser.add_argument('configs', nargs='*', help='recipe config files (or --all)')
    parser.add_argument('--all', action='store_true', help='every paper recipe under configs/det, seg, cls, d2')
    parser.add_argument('--batch', type=int, default=None, help="images per iteration (default: the recipe's per GPU)")
    parser.add_argument('--repeats', type=int, default=1, help='timed iterations of each kind (default 1)')
    parser.add_argument('--device', default=None, help='cpu, cuda, cuda:1, ... (default: cuda if available)')
    parser.add_argument(
        '--with-cp',
        default='as-written',
        choices=WITH_CP,
        help="the backbone's activation checkpointing; both: also measure the training iteration's "
        "memory the other way (the cost table's two columns)",
    )
    parser.add_argument('--no-test', dest='test', action='store_false', help='skip the test iteration')
    parser.add_argument('--cache', default=None, help='JSON lines of measured recipes (appended; --all skips these)')
    parser.add_argument('--from-cache', default=None, help='only write the tables from this cache')
    parser.add_argument('--out', default=None, help='write the dry-run table (Markdown) here')
    parser.add_argument('--costs', default=None, help='write the cost table (Markdown) here')
    parser.add_argument(
        '--gpu-rate',
        type=float,
        default=DEFAULT_GPU_RATE,
        help=f'sustained training TFLOP/s per GPU for the GPU hours (default {DEFAULT_GPU_RATE:g}: an assumption)',
    )
    parser.add_argument('--no-progress', dest='progress', action='store_false', help='no progress bar')
    add_cfg_options(parser)
    return parser


def dry_run_of(path: str | Path) -> Callable[..., Any]:
    """The dry run for the config at `path`: detectron2's for a LazyConfig, else the mm frameworks'."""
    from mmrecvit.mm.tooling import is_lazy_config

    if is_lazy_config(path):
        from mmrecvit.benchmark.dry_run_d2 import dry_run
    else:
        from mmrecvit.benchmark.dry_run_mm import dry_run
    return dry_run


def measure(path: Path, args: argparse.Namespace, say) -> dict:
    """One recipe's record (mmrecvit/mm/costs.py), with the other with_cp variant where asked."""
    dry_run = dry_run_of(path)
    cp = {'as-written': None, 'both': None, 'on': True, 'off': False}[args.with_cp]
    rel = os.path.relpath(path, REPO) if str(path).startswith(str(REPO)) else str(path)
    options = DryRunOptions(
        batch=args.batch, repeats=args.repeats, device=args.device, with_cp=cp, test=args.test, progress=say
    )
    options.cfg_options = args.cfg_options
    result = dry_run(str(path), options)
    record = dict(result.record(), config=rel, name=Path(path).stem)
    if args.with_cp == 'both' and result.with_cp is not None:
        flip = not result.with_cp
        only_train = dataclasses.replace(options, repeats=0, with_cp=flip, test=False)
        other = dry_run(str(path), dataclasses.replace(only_train, progress=lambda s: say(f'with_cp={flip} {s}')))
        record['other_cp'] = dict(
            with_cp=other.with_cp,
            saved_bytes=other.train.saved_bytes,
            peak_bytes=other.train.peak_bytes,
            flops=other.train.flops,
            backbone_flops=other.train.module(other.backbone_module),
        )
    return record


def machine() -> str:
    import torch

    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else f'{cpu_model()}, {physical_cores()} cores'
    return (
        f'{datetime.date.today().isoformat()}, {dev}, {torch.get_num_threads()} threads, Python '
        f'{platform.python_version()}, torch {torch.__version__}, mmrecvit {mmrecvit_version(REPO)}'
    )


def write_tables(records: list[dict], args: argparse.Namespace, pending: Sequence[str] = ()) -> None:
    by_family: dict[str, list[dict]] = {}
    for r in records:
        by_family.setdefault(family(r['config'], strict=False), []).append(r)
    todo = [f'- not measured yet: {", ".join(pending)}'] if pending else []
    where = records[0].get('machine', '') if records else ''
    measured_by = records[0].get('command') if records else None
    command = 'python tools/analysis_tools/dry_run.py ' + ' '.join(sys.argv[1:])
    if measured_by and measured_by != command:
        command = f'{measured_by}`, tables by `{command}'
    for path, title, table in (
        (args.out, 'Dry run of every recipe', dry_run_table),
        (args.costs, 'What each recipe costs', lambda rs: cost_table(rs, args.gpu_rate)),
    ):
        if not path:
            continue
        lines = [
            f'# {title}',
            '',
            f"Measured by `{command}` ({where}); what is measured and how: the tool's "
            'docstring (`--help`); a partial run continues where it stopped (`--cache`).',
            '',
        ]
        if table is dry_run_table:
            lines += [
                'Per iteration at the batch shown; MiB/img = MiB / batch. load: the 1-minute load average when '
                'the recipe finished (above the core count, times are inflated by other work; memory and FLOPs '
                'are not). AMP recipes ran in fp32 on the CPU.',
                '',
            ]
        else:
            lines += COST_NOTES + [
                f'GPU hours at {args.gpu_rate:g} TFLOP/s sustained per GPU'
                + (f' ({GPU_RATE_ASSUMPTION}).' if args.gpu_rate == DEFAULT_GPU_RATE else ' (given).'),
                '',
            ]
        for fam, rs in by_family.items():
            lines += [f'## {fam}', '', *table(rs), '']
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text('\n'.join(lines + todo) + '\n')


def read_cache(path: str | None) -> list[dict]:
    """The cached records, the latest one per config, in the order of `recipes()` (others after)."""
    if not path or not Path(path).is_file():
        return []
    latest = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            latest[record['config']] = record
    order = {os.path.relpath(p, REPO): i for i, p in enumerate(recipes())}
    return sorted(latest.values(), key=lambda r: order.get(r['config'], len(order)))


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.from_cache:
        records = read_cache(args.from_cache)
        if not records:
            parser.error(f'--from-cache {args.from_cache}: no records there')
        have = {r['config'] for r in records if not r.get('error')}
        write_tables(records, args, pending=[p.stem for p in recipes() if os.path.relpath(p, REPO) not in have])
        return records
    if args.all == bool(args.configs):
        parser.error('give recipe configs or --all (not both)')
    with bad_input(parser.prog):  # a missing or non-config file: one line
        paths = recipes() if args.all else [Path(config_file(c)) for c in args.configs]
    records = [r for r in read_cache(args.cache) if not r.get('error')]  # failed ones are measured again
    done = {r['config'] for r in records}
    from tqdm import tqdm

    bar = tqdm(paths, desc='dry run', unit='recipe', disable=not args.progress, dynamic_ncols=True)
    for i, path in enumerate(bar):
        rel = os.path.relpath(path, REPO) if str(path.resolve()).startswith(str(REPO)) else str(path)
        if args.all and rel in done:
            continue

        def say(what: str, name: str = path.stem) -> None:
            bar.set_postfix_str(f'{name}: {what}')

        try:
            record = measure(path.resolve(), args, say)
        except Exception as e:  # noqa: BLE001  (the table says which recipe failed and why; the others go on)
            if not args.all:
                from mmrecvit.benchmark.dry_run import RecipeError

                if isinstance(e, RecipeError):
                    parser.error(str(e))
                raise
            record = dict(config=rel, name=path.stem, error=f'{type(e).__name__}: {str(e).splitlines()[0][:200]}')
        record['machine'] = machine()
        record['command'] = 'python tools/analysis_tools/dry_run.py ' + ' '.join(sys.argv[1:])
        record['load'] = os.getloadavg()[0] if hasattr(os, 'getloadavg') else None  # when it finished
        records.append(record)
        if args.cache:
            with open(args.cache, 'a') as f:
                f.write(json.dumps(record) + '\n')
        if not args.all:
            print('\n'.join(dry_run_table([record])))
        write_tables(records, args, pending=[p.stem for p in paths[i + 1 :]] if args.all else ())
    return records


if __name__ == '__main__':
    main()
