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
import inspect
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

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


def own_default(make: Callable, name: str) -> Any:
    """A toy set's own default of `name`, from its writer's signature (where it is stated, once)."""
    return inspect.signature(make).parameters[name].default


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    toy = load_toy()
    p = argparse.ArgumentParser(description='Generate the toy COCO / ADE20K / classification datasets.')
    p.add_argument(
        '--out',
        default='data',
        help='data folder: gets toy_coco/, toy_ade/ADEChallengeData2016/ and toy_cls/ (default: data)',
    )
    p.add_argument(
        '--which', choices=['coco', 'ade', 'cls', 'all'], default='all', help='which set(s) to write (default: all)'
    )
    p.add_argument('--seed', type=int, default=0, help='seed of every image; same seed -> identical files (default: 0)')
    coco, ade, cls = toy.make_toy_coco, toy.make_toy_ade20k, toy.make_toy_cls
    sides = f'COCO {own_default(coco, "size")}, ADE20K {own_default(ade, "size")}'
    p.add_argument(
        '--size', type=int, help=f'square image side in pixels, toy COCO and ADE20K (default: theirs, {sides})'
    )
    for kind, name, make in (
        ('coco', 'toy COCO', coco),
        ('ade', 'toy ADE20K', ade),
        ('cls', 'toy classification', cls),
    ):
        for split, what in (('train', 'training'), ('val', 'validation')):
            own = own_default(make, f'num_{split}')
            p.add_argument(f'--{kind}-{split}', type=int, help=f'{name} {what} images (default: its own, {own})')
    own = own_default(cls, 'size')
    p.add_argument(
        '--cls-size', type=int, help=f'square side of the classification crops in pixels (default: its own, {own})'
    )
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
