"""What makes a toy set's folder complete, and the skip / rewrite logic every set writer shares.

`generate` skips or rewrites one set; `generate_images` is `generate` for the sets written one image
at a time (toy ADE20K and the classification set), with the split / progress-bar loop they share.

Each dataset root gets a small `MANIFEST_NAME` file that records the generator version and the
arguments. A later call with the same arguments finds the set complete and skips it; any other
call empties the folders the writer owns and writes them again. A non-empty folder without a
manifest is someone else's data and is left alone unless the caller forces it.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np
from tqdm import tqdm

PathLike = Union[str, Path]

# Bump whenever the output for a given seed/arguments changes: existing sets then regenerate.
TOY_DATA_VERSION = 3
MANIFEST_NAME = 'toy_manifest.json'

# Recorded in every manifest and compared on reuse: changing it makes every existing set regenerate.
_GENERATOR = 'mmrecvit.datasets.toy'


@dataclass
class ToyDataResult:
    """What one `make_toy_coco` / `make_toy_ade20k` / `make_toy_cls` call did."""

    kind: str  # 'coco', 'ade' or 'cls'
    root: Path  # the dataset root (a config's ``data_root``)
    num_train: int
    num_val: int
    size: int
    seconds: float  # wall time of the call
    skipped: bool  # True: an identical complete set was already there
    files: dict[str, Path] = field(default_factory=dict)  # main paths, for summaries


def check_args(num_train: int, num_val: int, size: int, seed: int) -> None:
    """The argument checks every writer shares; the error names the argument."""
    for name, value, low in (
        ('num_train', num_train, 0),
        ('num_val', num_val, 0),
        ('size', size, 64),
        ('seed', seed, 0),
    ):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise ValueError(f'{name} must be an integer >= {low}, got {value!r}')


def _manifest_args(kind: str, **args: Any) -> dict[str, Any]:
    return {'generator': _GENERATOR, 'version': TOY_DATA_VERSION, 'kind': kind, 'args': args}


def _is_complete(root: Path, expected: dict[str, Any], paths: Iterable[str]) -> bool:
    try:
        manifest = json.loads((root / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return False
    same = all(manifest.get(k) == v for k, v in expected.items())
    return same and manifest.get('complete') is True and all((root / p).is_file() for p in paths)


def _prepare(root: Path, owned: Sequence[str], force: bool) -> None:
    """Empty the ``owned`` folders under ``root``; refuse to touch a foreign dataset."""
    if root.is_dir() and any(root.iterdir()) and not (root / MANIFEST_NAME).is_file() and not force:
        raise FileExistsError(
            f'{root} is not empty and has no {MANIFEST_NAME}: it is not a toy set written by this '
            'generator; pass force=True (--force) to overwrite its '
            f'{", ".join(owned)} folders, or choose another root'
        )
    for name in owned:
        if (root / name).is_dir():
            shutil.rmtree(root / name)
    root.mkdir(parents=True, exist_ok=True)


def generate(
    kind: str,
    root: PathLike,
    args: dict[str, Any],
    expected_paths: list[str],
    owned: Sequence[str],
    force: bool,
    write: Callable[[Path], None],
) -> ToyDataResult:
    """Skip ``root`` if it holds a complete set made with ``args``, else empty ``owned`` and ``write(root)``.

    ``expected_paths`` (relative to ``root``) are the files a complete set has; ``owned`` are the
    folders the writer fills, the only ones a rewrite deletes.
    """
    start = time.perf_counter()
    root = Path(root)
    expected = _manifest_args(kind, **args)
    skipped = not force and _is_complete(root, expected, expected_paths)
    if not skipped:
        _prepare(root, owned, force)
        # written first with complete=False, so an interrupted run is recognised as ours and redone
        (root / MANIFEST_NAME).write_text(json.dumps({**expected, 'complete': False}, indent=2))
        write(root)
        (root / MANIFEST_NAME).write_text(json.dumps({**expected, 'complete': True}, indent=2))
    return ToyDataResult(
        kind=kind,
        root=root,
        num_train=args['num_train'],
        num_val=args['num_val'],
        size=args['size'],
        seconds=time.perf_counter() - start,
        skipped=skipped,
    )


def generate_images(
    kind: str,
    root: PathLike,
    args: dict[str, Any],
    owned: Sequence[str],
    force: bool,
    progress: bool,
    folders: dict[str, list[str]],
    files: Callable[[str, int], list[str]],
    draw: Callable[[str, int], list[bytes]],
) -> ToyDataResult:
    """`generate` for a set written one image at a time: image ``i`` of ``split`` is the files
    ``files(split, i)`` (relative to ``root``) holding ``draw(split, i)``.

    ``folders`` maps each split (``'train'``, ``'val'``) to the folders it gets even when empty,
    which hold all its files. ``args`` has the ``num_train`` and ``num_val`` images per split.
    """
    counts = {'train': args['num_train'], 'val': args['num_val']}
    paths = [path for split, n in counts.items() for i in range(n) for path in files(split, i)]

    def write(r: Path) -> None:
        for split, n in counts.items():
            for folder in folders[split]:
                (r / folder).mkdir(parents=True, exist_ok=True)
            for i in tqdm(range(n), desc=f'toy {kind} {split}', unit='img', disable=not progress):
                for path, data in zip(files(split, i), draw(split, i)):
                    (r / path).write_bytes(data)

    return generate(kind, root, args, paths, owned, force, write)
