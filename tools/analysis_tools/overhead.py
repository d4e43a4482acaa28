"""Python overhead of a backbone forward, side by side with timm's ViT: library calls and overhead-bound latency.

    python tools/analysis_tools/overhead.py                      # the S-size table of every method
    python tools/analysis_tools/overhead.py --repeats 0          # calls only (deterministic; no timing)
    python tools/analysis_tools/overhead.py --out benchmarks/python_overhead.md

Library calls are exact (`sys.setprofile`: calls of mmrecvit's and timm's Python code in one eval forward, on a
repeated input and the most on new ones), as are the library frames on the stack at each attention call; the
latency is the median at 32x32, batch 1 (4 patch tokens: almost no arithmetic), a proxy for what bounds a small
batch on a GPU, the kernel launches (`mmrecvit/benchmark/overhead.py`). Targets (issue 39): PlainViT-S at most
1.5x timm ViT-S's calls for the same work, each recursive method's overhead-bound latency per block application
at most 1.1x PlainViT-S's (its calls per application are reported beside it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import timm
import torch

import mmrecvit  # noqa: F401  (registers the backbones)
from mmrecvit.benchmark.forcing import force_mean_depth, pop_depth_forcing
from mmrecvit.benchmark.overhead import format_table, measure, timm_forward
from mmrecvit.models import BACKBONES

# The models of the table: each method at size S in its default configuration (Edge-RecViT on a seeded depth
# pattern of the paper's mean 8.3 of 12 layers, as the benchmark harness runs it), and the two whose routers decide
# each image's token counts anew: Edge-RecViT on its own (seeded, untrained) ranker, MoR-ViT with token choice.
MODELS = {
    'PlainViT-S': ('PlainViT', {}),
    'NaiveRecursiveViT-S': ('NaiveRecursiveViT', {}),
    'SRViT-S T=4': ('SRViT', {}),
    'ReViT-S': ('ReViT', {}),
    'EdgeRecViT-S mean 8.3': ('EdgeRecViT', {'forced_mean_depth': 8.3}),
    'EdgeRecViT-S ranker': ('EdgeRecViT', {}),
    'MoRViT-S': ('MoRViT', {}),
    'MoRViT-S token choice': ('MoRViT', {'routing': 'token_choice'}),
}


def build(size: int) -> dict:
    models = {}
    vit = timm.create_model('vit_small_patch16_224', num_classes=0, img_size=size)
    models['timm ViT-S'] = (vit, timm_forward(vit))
    for label, (name, kwargs) in MODELS.items():
        kwargs = dict(kwargs)
        forcing = pop_depth_forcing(kwargs)
        model = BACKBONES[name](arch='small', img_size=size, **kwargs)
        if forcing:
            force_mean_depth(model, **forcing)
        models[label] = (model, model)
    return models


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--size', type=int, default=32, help='square input size (default 32: 2x2 patches)')
    parser.add_argument('--repeats', type=int, default=50, help='interleaved timed forwards per model (0: calls only)')
    parser.add_argument('--threads', type=int, default=1, help='torch threads (default 1)')
    parser.add_argument('--out', help='write the Markdown report here')
    args = parser.parse_args(argv)
    if args.size < 16:
        parser.error(f'--size must be at least one 16x16 patch, got {args.size}')
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = measure(build(args.size), size=args.size, repeats=args.repeats)
    report = '\n'.join(
        [
            '## Python overhead: library calls and overhead-bound latency (a GPU-launch proxy)',
            '',
            f'Command: `python tools/analysis_tools/overhead.py --size {args.size} --repeats {args.repeats} '
            f'--threads {args.threads}`. One eval forward at {args.size}x{args.size}, batch 1, torch '
            f"{torch.__version__}, {args.threads} thread(s). Library calls: Python calls of mmrecvit's and timm's "
            'code (`sys.setprofile`, a generator resumed counts as a call), exact, on a repeated input (every cache '
            'warm) and the most over 4 new inputs; library frames to attention: that code on the stack at each '
            'attention call, fewest-most (issue 47: PlainViT-S at most 5, timm 3); latency: median of interleaved '
            "repeats, noisy on a shared machine. Targets (issue 39): PlainViT-S's calls <= 1.5x timm ViT-S's; every "
            "method's overhead per block application, its overhead-bound latency per application, <= 1.1x "
            "PlainViT-S's. Calls per application (repeated input) are reported beside it: the token-adaptive engines "
            'make more (per-step token subsets, key/value cache, routers) at less time per application.',
            '',
            format_table(rows, reference='timm ViT-S', per_application_reference='PlainViT-S'),
            '',
        ]
    )
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    return report


if __name__ == '__main__':
    sys.exit(0 if main() else 1)
