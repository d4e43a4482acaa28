"""Write the embedded toy COCO / ADE20K / classification sets that the toy configs and the demo use.

    python tools/misc/make_toy_data.py          # data/toy_coco, data/toy_ade/ADEChallengeData2016, data/toy_cls
    python tools/misc/make_toy_data.py --which coco --coco-train 400 --seed 1
    python tools/misc/make_toy_data.py --which cls --cls-size 96
    python tools/misc/make_toy_data.py --force               # regenerate even if complete

Idempotent: a set whose manifest records the same generator version and arguments, and whose
files are all present, is skipped. The generator is the `mmrecvit.datasets.toy` package; see its
modules' docstrings for the layouts.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_toy() -> ModuleType:
    """Load the `mmrecvit/datasets/toy/` package by path, under a private name.

    ``import mmrecvit.datasets.toy`` would run ``mmrecvit/__init__``, which imports torch and
    registers into mmdet/mmseg (seconds, and it needs the full stack installed). The generator
    only needs numpy, OpenCV, pycocotools and tqdm, and imports its own modules relatively, so
    registering the package alone (with its folder as the search path for those modules) lets
    the data be made before or without the rest.
    """
    name = 'mmrecvit_toy_data'
    if name in sys.modules:
        return sys.modules[name]
    package = REPO / 'mmrecvit' / 'datasets' / 'toy'
    spec = importlib.util.spec_from_file_location(
        name, package / '__init__.py', submodule_search_locations=[str(package)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the relative imports and the dataclasses look the package up here
    spec.loader.exec_module(module)
    return module


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description='Generate the toy COCO / ADE20K / classification datasets.',
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        '--out', default='data', help='data folder: gets toy_coco/, toy_ade/ADEChallengeData2016/ and toy_cls/'
    )
    p.add_argument('--which', choices=['coco', 'ade', 'cls', 'all'], default='all', help='which set(s) to write')
    p.add_argument('--seed', type=int, default=0, help='seed of every image (same seed -> identical files)')
    p.add_argument('--size', type=int, default=256, help='square image side in pixels (toy COCO and ADE20K)')
    p.add_argument('--coco-train', type=int, default=200, help='toy COCO training images')
    p.add_argument('--coco-val', type=int, default=50, help='toy COCO validation images')
    p.add_argument('--ade-train', type=int, default=120, help='toy ADE20K training images')
    p.add_argument('--ade-val', type=int, default=30, help='toy ADE20K validation images')
    p.add_argument('--cls-train', type=int, default=1000, help='toy classification training images')
    p.add_argument('--cls-val', type=int, default=250, help='toy classification validation images')
    p.add_argument('--cls-size', type=int, default=64, help='square side of the classification crops in pixels')
    p.add_argument('--force', action='store_true', help='regenerate even if a matching complete set exists')
    p.add_argument('--no-progress', action='store_true', help='no progress bar')
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    toy = load_toy()
    options = vars(args)  # the size and count options are named as make_toy_data's parameters
    out, which, no_progress = options.pop('out'), options.pop('which'), options.pop('no_progress')
    start = time.perf_counter()
    which = toy.KINDS if which == 'all' else (which,)
    results = toy.make_toy_data(out, which=which, progress=not no_progress, **options)
    names = {'coco': 'toy COCO  ', 'ade': 'toy ADE20K', 'cls': 'toy cls   '}
    classes = {
        'coco': ', '.join(toy.TOY_COCO_CLASSES),
        'ade': ', '.join(f'{n} ({v})' for n, v in toy.TOY_ADE_LABELS.items()),
        'cls': ', '.join(toy.TOY_CLS_CLASSES),
    }
    for kind, r in results.items():
        state = 'already complete, skipped' if r.skipped else f'written in {r.seconds:.1f} s'
        print(f'{names[kind]}  {r.root}  {r.num_train} train / {r.num_val} val  {r.size}x{r.size}  ({state})')
        print(f'            classes{" (ADE20K index)" if kind == "ade" else ""}: {classes[kind]}')
    print(f'total {time.perf_counter() - start:.1f} s')
    return results


if __name__ == '__main__':
    main()
