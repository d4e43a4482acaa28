"""Write `metafile.yml` (OpenMMLab model index) for every config and print the README model table.

    python tools/misc/gen_metafile.py                      # all configs in configs/, writes metafile.yml
    python tools/misc/gen_metafile.py --configs configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py --out x.yml

Params and FLOPs are computed here, every run, so the file stays true: each config's model is built
through mmdet's/mmseg's registry with random weights (seed 0) and counted by
`mmrecvit.mm.complexity.count_complexity` (the backbones' analytic count + mmengine's counter for
neck and heads, batch 1) on the toy val image at two sizes: resized to 224x224, and through the
config's test pipeline ("test size"). FLOPs are 2 x multiply-accumulates, the papers' convention
(`mmrecvit/models/flops.py`). Token-adaptive backbones are given both counts: the tokens really processed (which, with
random weights, reflects a random ranker/router) and dense.

CPU latency: each backbone's forward (224x224, batch 1, random weights) is timed interleaved with the
PlainViT of its group (same task, same size: the S recipes or the toy configs) in this run, and the
ratio of medians is recorded (`--latency-repeats 0` skips it). Results are the toy-demo scores that
`tools/demo.py` saved (`<work-dir>/<task>_<model>/scores.json`, found under `--scores` folders);
configs without a saved score get null. The Markdown table keeps apart what was measured here and
what the papers report (ImageNet; the papers: docs/glossary.md).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import yaml

from mmrecvit.benchmark import interleaved_order, time_call
from mmrecvit.inputs import InputError, bad_input, config_file, tool_parser
from mmrecvit.mm.complexity import count_complexity
from mmrecvit.mm.tooling import build_model, default_image, in_percent, init_scope, load_config, prepare_inputs

REPO = Path(__file__).resolve().parents[2]  # the checkout of this tool: its configs/, metafile.yml and data/

# One collection per backbone type. Paper titles/links as docs/glossary.md lists them;
# `paper` is what the paper reports (ImageNet-1k classification, not dense tasks).
COLLECTIONS: dict[str, dict[str, Any]] = {
    'PlainViT': dict(
        title='Training data-efficient image transformers & distillation through attention (DeiT)',
        url='https://arxiv.org/abs/2012.12877',
        code='mmrecvit/models/vit.py',
        architecture=['ViT', 'Pre-norm Transformer'],
        paper='unshared reference; the recursive papers compare against DeiT/DeiT III',
    ),
    'NaiveRecursiveViT': dict(
        title="Naive recursive ViT: the papers' baseline (an ablation of SoftMoR)",
        url=None,
        code='mmrecvit/models/vit.py',
        architecture=['ViT', 'Weight sharing'],
        paper='degrades as recursion grows (qualitative, SoftMoR notes)',
    ),
    'SRViT': dict(
        title='SoftMoR / SR-ViT: soft mixture over recursion steps (notes: papers/000_030cc631b3297ecf.txt)',
        url=None,
        code='mmrecvit/models/srvit.py',
        architecture=['ViT', 'Recursion', 'Soft router'],
        paper='SR-ViT-S ImageNet top-1 79.83% (T=1) -> 82.48% (T=4), +1.7M params',
    ),
    'ReViT': dict(
        title='One Block, Multiple Depths: Recurrent Vision Transformers with Depth-Programmed Experts',
        url=None,
        code='mmrecvit/models/revit.py',
        architecture=['ViT', 'Recursion', 'Weight-space experts'],
        paper='S/16 E=4 78.2% top-1 with 6.1M params (DeiT III-S 79.9%, 22.1M); B/16 E=4 83.0%, 23.6M',
    ),
    'EdgeRecViT': dict(
        title='Edge-RecViT: Efficient Vision Transformer via Semantic-Refined Dynamic Recursion (CVPR 2026)',
        url='https://github.com/RicardoLee510520/Edge-RecViT',
        code='mmrecvit/models/edge_recvit.py',
        architecture=['ViT', 'Recursion', 'Token-adaptive depth'],
        paper='B: 82.0% top-1, 23.2M params, 24.39 GFLOPs (2 x MACs) vs DeiT-B 81.8%, 86M, 35.2G',
    ),
    'MoRViT': dict(
        title='MoR-ViT: token-level Mixture-of-Recursions for ViT (notes: papers/003_8d85909b3fe63fc1.txt)',
        url=None,
        code='mmrecvit/models/mor_vit.py',
        architecture=['ViT', 'Recursion', 'Token routing'],
        paper='up to 70% fewer params and 2.5x faster than ViT-B at similar accuracy (no tables in our notes)',
    ),
}
TASKS = {
    'mmdet': ('Instance Segmentation', ['box AP', 'mask AP']),
    'mmseg': ('Semantic Segmentation', ['mIoU']),
    'mmpretrain': ('Image Classification', ['Top 1 Accuracy']),
}
# metafile metric <- the key tools/demo.py saved (mmdet's CocoMetric / mmseg's IoUMetric / mmpretrain's Accuracy)
SCORE_KEYS = {'box AP': 'coco/bbox_mAP', 'mask AP': 'coco/segm_mAP', 'mIoU': 'mIoU', 'Top 1 Accuracy': 'accuracy/top1'}
LATENCY_KEY = 'CPU latency ratio vs PlainViT (backbone, 224x224, batch 1)'
HEADER = """\
# Model index of mmrecvit. GENERATED by tools/misc/gen_metafile.py: do not edit by hand, rerun it.
# Metadata is MEASURED HERE by that script: params, and FLOPs per image in mmengine's convention
# (1 multiply-accumulate = 1 FLOP; papers count 2 x MACs) with random weights (seed 0), batch 1, on
# the toy val image resized to 224x224 and through each config's test pipeline (Test Size). Backbone
# FLOPs count the tokens each block application really processed (token-adaptive models: with a
# random ranker/router) and, as "dense", every token through every application.
# Metadata also holds the CPU latency ratio of the backbone vs the PlainViT of the same recipe, timed
# interleaved in the run that wrote this file. Results are toy-demo scores saved by tools/demo.py
# (trained on the embedded toy set for Toy Training Iterations); null where no saved score was given.
# Paper numbers are not in this file: see docs/model_index.md (quoted from the papers).
"""


def display(path: Path) -> str:
    """A config path as the metafile lists it: relative to the repository when inside it."""
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.as_posix()


def discover(root: Path) -> list[Path]:
    """Every model config under configs/ except the `_base_` files (configs/d2/ holds detectron2 LazyConfigs,
    configs/distill/ recipes that make a start, no model of their own)."""
    return sorted(p for p in (root / 'configs').rglob('*.py') if not {'_base_', 'd2', 'distill'} & set(p.parts))


def measure(config: Path) -> dict[str, Any]:
    """Params and FLOPs of one config at 224x224 and at its test size (see the module docstring)."""
    cfg = load_config(config)
    scope = init_scope(cfg)
    model, _ = build_model(cfg, seed=0)
    image = default_image(scope, REPO / 'data')
    out: dict[str, Any] = dict(scope=scope, backbone=model.backbone.__class__.__name__, module=model.backbone)
    for key, shape in (('224', (224, 224)), ('test', None)):
        data = prepare_inputs(model, cfg, image, shape)
        report = count_complexity(model, data, trace_backbone=False)
        out[key] = dict(
            size='x'.join(map(str, data['image'].shape[:2])),
            gflops=report.flops / 1e9,
            backbone_gflops=report.backbone_flops / 1e9,
            backbone_dense_gflops=report.backbone_dense_flops / 1e9,
        )
        out.update(params=report.params, backbone_params=report.backbone_params)
    dataset = cfg.train_dataloader.dataset
    toy = 'toy' in str(dataset.get('data_root', ''))
    out['dataset'] = {'CocoDataset': 'COCO', 'ADE20KDataset': 'ADE20K', 'ImageNet': 'ImageNet-1k'}.get(
        dataset.type, dataset.type
    )
    out['dataset'] += ' (embedded toy set)' if toy else ''
    return out


def latency_group(config: Path) -> str:
    """Configs timed against the same PlainViT: same task folder, toy or full-size recipe."""
    return f'{config.parent.name}/{"toy" if "toy" in config.stem else "full"}'


def latency_ratios(configs: list[Path], measured: dict[str, dict[str, Any]], repeats: int) -> dict[str, float]:
    """Backbone latency / latency of the group's PlainViT (medians of `repeats` interleaved forwards)."""
    ratios: dict[str, float] = {}
    if repeats <= 0:
        return ratios
    groups: dict[str, list[str]] = {}
    for config in configs:
        if config.stem in measured:
            groups.setdefault(latency_group(config), []).append(config.stem)
    x = torch.randn(1, 3, 224, 224)
    cpu = torch.device('cpu')
    for group, names in groups.items():
        refs = [n for n in names if measured[n]['backbone'] == 'PlainViT']
        if not refs:
            print(f'latency: no PlainViT config in {group}; its ratios are left out', file=sys.stderr)
            continue
        modules = [measured[n]['module'].eval() for n in names]
        times: list[list[float]] = [[] for _ in names]
        print(f'latency: {group}, {len(names)} backbones x {repeats} interleaved forwards', file=sys.stderr, flush=True)
        with torch.no_grad():
            for module in modules:  # warm-up
                module(x)
            for i in interleaved_order(len(names), repeats):
                times[i].append(time_call(modules[i], x, cpu))
        medians = dict(zip(names, map(statistics.median, times)))
        ratios.update({n: medians[n] / medians[refs[0]] for n in names})
    return ratios


def find_scores(folders: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Saved toy-demo scores (`*/scores.json` under each folder) by config stem; later folders win."""
    scores = {}
    for folder in folders:
        paths = sorted(Path(folder).glob('*/scores.json'))
        if not paths:
            raise InputError(f'--scores {folder}: no */scores.json there (tools/demo.py writes them)')
        for path in paths:
            saved = json.loads(path.read_text())
            if 'config' in saved:  # not the summary of a `--task transfer` run (its two runs are in sub-folders)
                scores[Path(saved['config']).stem] = saved
    return scores


def model_entry(
    config: Path, m: dict[str, Any], latency: float | None = None, score: dict[str, Any] | None = None
) -> dict[str, Any]:
    task, metrics = TASKS[m['scope']]
    r2 = lambda v: round(float(v), 2)  # noqa: E731
    results = {name: None for name in metrics}
    if score is not None:
        trained = in_percent(score['trained'])  # every score in percent, as OpenMMLab's metafiles (box AP 40.3)
        results = {name: round(float(trained[SCORE_KEYS[name]]), 2) for name in metrics}
    return {
        'Name': config.stem,
        'In Collection': m['backbone'],
        'Config': display(config),
        'Metadata': {
            'Backbone': m['backbone'],
            'Parameters (M)': r2(m['params'] / 1e6),
            'Backbone Parameters (M)': r2(m['backbone_params'] / 1e6),
            'FLOPs (G, 224x224)': r2(m['224']['gflops']),
            'Backbone FLOPs (G, 224x224)': r2(m['224']['backbone_gflops']),
            'Backbone FLOPs dense (G, 224x224)': r2(m['224']['backbone_dense_gflops']),
            'Test Size': m['test']['size'],
            'FLOPs (G, test size)': r2(m['test']['gflops']),
            'Backbone FLOPs (G, test size)': r2(m['test']['backbone_gflops']),
            'Backbone FLOPs dense (G, test size)': r2(m['test']['backbone_dense_gflops']),
            LATENCY_KEY: None if latency is None else round(latency, 3),
            'Toy Training Iterations': None if score is None else int(score['iters']),
        },
        'Results': [{'Task': task, 'Dataset': m['dataset'], 'Metrics': results}],
    }


def collection_entry(name: str) -> dict[str, Any]:
    info = COLLECTIONS.get(name)
    if info is None:  # a backbone added later: listed, with its paper to be filled in COLLECTIONS
        print(f'note: no COLLECTIONS entry for {name}; its collection has no paper yet', file=sys.stderr)
        info = dict(title=None, url=None, code=None, architecture=['ViT'])
    return {
        'Name': name,
        'Metadata': {'Architecture': info['architecture']},
        'Paper': {'Title': info['title'], 'URL': info['url']},
        'Code': {'URL': info['code']},
    }


def to_yaml(obj: Any, indent: int = 0) -> list[str]:
    """A small block-style YAML emitter (yaml.safe_dump cannot write the Results comment)."""
    pad = ' ' * indent
    lines: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == 'Results':
                lines.append(f'{pad}# toy-demo scores: null until measured; the lead fills them in')
            if isinstance(v, (dict, list)) and v:
                lines.append(f'{pad}{k}:')
                lines += to_yaml(v, indent + 2)
            else:
                lines.append(f'{pad}{k}: {scalar(v)}')
    else:
        for item in obj:
            if isinstance(item, dict) and item:
                sub = to_yaml(item, indent + 2)
                lines.append(f'{pad}- {sub[0].lstrip()}')
                lines += sub[1:]
            else:
                lines.append(f'{pad}- {scalar(item)}')
    return lines


def scalar(v: Any) -> str:
    text = yaml.safe_dump(v, default_flow_style=True, width=1000, allow_unicode=True)
    return text.strip().removesuffix('...').strip()


def markdown_table(entries: list[dict[str, Any]]) -> str:
    """The README model table: measured columns, then the papers' numbers per method."""
    lines = [
        'Measured here (tools/misc/gen_metafile.py; random weights, batch 1, FLOPs in mmengine convention '
        '= GMACs; backbone FLOPs as active tokens / dense; toy scores filled in from tools/demo.py runs):',
        '',
        '| config | backbone | params (M) | backbone params (M) | backbone GFLOPs 224² | GFLOPs 224² '
        '| test size | backbone GFLOPs test size (active / dense) | GFLOPs test size '
        '| CPU latency vs PlainViT | toy score (trained, iterations) |',
        '|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|:--|',
    ]
    for e in entries:
        md = e['Metadata']
        act, dense = md['Backbone FLOPs (G, test size)'], md['Backbone FLOPs dense (G, test size)']
        latency = '–' if md[LATENCY_KEY] is None else f'{md[LATENCY_KEY]:.2f}'
        metrics = e['Results'][0]['Metrics']
        score = ', '.join(f'{k} {v:.1f}' for k, v in metrics.items() if v is not None) or '–'
        if md['Toy Training Iterations'] is not None:
            score += f' ({md["Toy Training Iterations"]} it.)'
        lines.append(
            f'| [{e["Name"]}]({e["Config"]}) | {md["Backbone"]} | {md["Parameters (M)"]} '
            f'| {md["Backbone Parameters (M)"]} | {md["Backbone FLOPs (G, 224x224)"]} '
            f'| {md["FLOPs (G, 224x224)"]} | {md["Test Size"]} | {act} / {dense} '
            f'| {md["FLOPs (G, test size)"]} | {latency} | {score} |'
        )
    used = sorted(
        {e['In Collection'] for e in entries},
        key=lambda n: list(COLLECTIONS).index(n) if n in COLLECTIONS else len(COLLECTIONS),
    )
    lines += [
        '',
        "Papers' numbers (quoted from the papers, [glossary.md](glossary.md#papers); ImageNet-1k classification, NOT "
        'measured here; papers count FLOPs as 2 x MACs):',
        '',
        '| method | paper | reported |',
        '|:--|:--|:--|',
    ]
    for name in used:
        info = COLLECTIONS.get(name, {})
        title = info.get('title') or '–'
        paper = f'[{title}]({info["url"]})' if info.get('url') else title
        lines.append(f'| {name} | {paper} | {info.get("paper", "–")} |')
    return '\n'.join(lines) + '\n'


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = tool_parser('tools/misc/gen_metafile.py', __doc__)
    parser.add_argument('--configs', nargs='+', default=None, help='configs to index (default: all in configs/)')
    parser.add_argument('--out', default=str(REPO / 'metafile.yml'), help='metafile path (default: metafile.yml)')
    parser.add_argument('--json', default=None, help='also write the raw measurements as JSON')
    parser.add_argument(
        '--scores',
        nargs='+',
        default=[],
        metavar='DIR',
        help='work dirs of tools/demo.py runs (their */scores.json fill the toy scores)',
    )
    parser.add_argument(
        '--latency-repeats',
        type=int,
        default=10,
        help='interleaved forwards per backbone for the latency ratio (0: skip)',
    )
    parser.add_argument(
        '--skip-errors',
        action='store_true',
        help='leave out (and list) configs that fail to build or run, instead of stopping',
    )
    args = parser.parse_args(argv)
    if args.latency_repeats < 0:
        parser.error(f'--latency-repeats must be >= 0 (0 skips the timing), got {args.latency_repeats}')
    with bad_input(parser.prog):  # a missing config or score folder: one line
        configs = [Path(config_file(c, '--configs')).resolve() for c in args.configs or []] or discover(REPO)
        scores = find_scores(args.scores)
    measured, entries, failed = {}, [], []
    for i, config in enumerate(configs, 1):
        print(f'[{i}/{len(configs)}] {display(config)}', file=sys.stderr, flush=True)
        try:
            measured[config.stem] = measure(config)
        except Exception as e:  # noqa: BLE001  (listed, and fatal unless --skip-errors)
            if not args.skip_errors:
                raise
            failed.append(f'{display(config)}: {type(e).__name__}: {e}')
    ratios = latency_ratios(configs, measured, args.latency_repeats)
    for config in configs:
        if config.stem in measured:
            entries.append(model_entry(config, measured[config.stem], ratios.get(config.stem), scores.get(config.stem)))
    names = list(dict.fromkeys(e['In Collection'] for e in entries))
    doc = {'Collections': [collection_entry(n) for n in names], 'Models': entries}
    text = HEADER + '\n'.join(to_yaml(doc)) + '\n'
    if yaml.safe_load(text) != doc:
        raise RuntimeError('the YAML emitter does not round-trip; not writing')
    Path(args.out).write_text(text)
    if args.json:
        raw = {name: {k: v for k, v in m.items() if k != 'module'} for name, m in measured.items()}
        Path(args.json).write_text(json.dumps(raw, indent=2))
    print(markdown_table(entries), end='')
    print(f'\nwrote {args.out} ({len(entries)} models, {len(names)} collections)', file=sys.stderr)
    if failed:
        print('NOT INDEXED (the config does not build or run):\n  ' + '\n  '.join(failed), file=sys.stderr)
    return entries


if __name__ == '__main__':
    main()
