"""Key-by-key differences between a recipe of ours and the anchor config it is written against.

    python tools/analysis_tools/recipe_diff.py configs/seg/upernet_srvit-s_8xb2-160k_ade20k-512x512.py
    python tools/analysis_tools/recipe_diff.py OURS mmseg::vit/vit_deit-s16_upernet_8xb2-160k_ade20k-512x512.py
    python tools/analysis_tools/recipe_diff.py OURS --check   # exit 1 on a difference the recipe does not list

Both configs are read from their own files (an anchor named `scope::path` from the installed package's
`.mim/configs`, as mmengine's `mmseg::` bases are; `vendor::` from the vendored sources, `vendor_dir`). A recipe
states its anchor and its intended differences as data: `recipe = dict(anchor='scope::path', intended={'key
pattern': 'why', ...})`, the patterns fnmatch-style over the keys printed here (a derived recipe adds entries:
mmengine merges the dicts of its bases; an entry set to None withdraws a base's entry where the derived recipe
agrees with the anchor again), `expected={key: value}` pinning our value of a difference that exists by design
(an AdamW lr against an SGD anchor: listed, but 1e-4 and nothing else), and `key_map={our prefix: the anchor's}`
where the two configs name one thing differently (a dataset inside a RepeatDataset). Keys are dotted paths; a
pipeline (a list of dicts with `type`) is matched step by step by type, so an inserted step is one difference
(`train_pipeline.CheckSegMap`) rather than a shift of every index after it, and a step's parameters are
`train_pipeline.RandomCrop.crop_size`. mmengine's registry bookkeeping (`_scope_`) is not a difference. `--check`
also fails on a listed pattern that matches no difference (a stale entry).
The output names both files in a header, then one line per difference with the reason of the most specific pattern
that lists it (a key listed by name wins over a wildcard of a base recipe); a reason that points at a comment
"(above)" names the file and line of the setting that comment is above. A subtree on one side against a plain value
on the other (`model.neck`: ours a SimplePyramid, mmseg's None) is shown as the subtree's keys, the other side
`<absent: model.neck=None>`.
detectron2 LazyConfigs (configs/d2, detectron2's projects/ViTDet): a file that imports detectron2 or mmrecvit.d2, or
imports relatively (how LazyConfigs derive), is read with `LazyConfig.load`: its module-level dicts, `recipe` among
them (`__all__` is not read; a derived file imports the base's `recipe` and updates it, None withdrawing an entry).
A `_target_` (or any class or function) compares as its qualified name (`detectron2.modeling.backbone.vit.ViT`), a
`functools.partial` as a LazyCall, and a list of LazyCalls as a pipeline keyed by the `_target_`'s short name
(`dataloader.train.mapper.augmentations.ResizeScale.max_scale`). The comparison itself: `mmrecvit/mm/config_diff.py`.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fnmatch
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from mmengine import Config

from mmrecvit.inputs import InputError, bad_input, config_file
from mmrecvit.mm.config_diff import ABSENT, diff, flatten, renamed  # noqa: F401  (renamed: tests)
from mmrecvit.mm.tooling import is_lazy_config

ANCHOR_SCOPES = ('mmdet', 'mmseg', 'mmpretrain', 'vendor')
# A vendored project tree whose configs name their bases `../../../configs/...`: the installed package they come from.
VENDOR_BASES = {'mmdet-vitdet-394f758': 'mmdet'}
CACHE = Path(os.environ.get('XDG_CACHE_HOME', Path.home() / '.cache')) / 'mmrecvit' / 'vendor'


def vendor_dir() -> Path:
    """The vendored sources of these machines: $MMRECVIT_VENDOR_DIR, else ../shared/vendor beside the repository,
    else /work/shared/vendor (as scripts/setup.sh looks for detectron2's source)."""
    here = Path(__file__).resolve().parents[2]
    candidates = (
        [Path(os.environ['MMRECVIT_VENDOR_DIR'])]
        if os.environ.get('MMRECVIT_VENDOR_DIR')
        else [here.parent / 'shared' / 'vendor', Path('/work/shared/vendor')]
    )
    for folder in candidates:
        if folder.is_dir():
            return folder
    raise FileNotFoundError(
        f'vendor:: anchors: no vendored sources at {", ".join(map(str, candidates))} (set MMRECVIT_VENDOR_DIR)'
    )


def _package_configs(package: str) -> Path:
    """The installed package's `.mim/configs` folder (where mmengine's `package::` bases come from)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise InputError(f'anchor scope {package!r}: the package is not installed')
    return Path(spec.origin).parent / '.mim' / 'configs'


def _publish(root: Path, fill: Callable[[Path], None]) -> None:
    """Fill a fresh folder, then rename it to `root` (atomic: a concurrent or killed run leaves no half tree)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=root.parent, prefix=root.name + '.'))
    fill(stage)
    try:
        stage.rename(root)
    except OSError:  # another process published it first
        shutil.rmtree(stage)


def _vendor_file(rel: str) -> Path:
    """`vendor::` paths: `<tarball>.tar.gz/<path inside>` (its .py files extracted once into the cache) or
    `<folder>/<path>` (a tree in VENDOR_BASES is staged with its package's configs as `configs/`, one tree per
    installed package)."""
    top, _, inner = rel.partition('/')
    source = vendor_dir() / top
    if top.endswith('.tar.gz'):
        root = CACHE / top[: -len('.tar.gz')]
        if not root.is_dir():
            with tarfile.open(source) as tar:
                members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith('.py')]
                _publish(root, lambda stage: tar.extractall(stage, members, filter='data'))
        return next(root.iterdir()) / inner  # the tarball's single top folder (git archive's prefix)
    if top in VENDOR_BASES:
        configs = _package_configs(VENDOR_BASES[top])
        # one tree per installed package: a tree linked to another environment's (perhaps removed) configs is not ours
        root = CACHE / f'{top}-{hashlib.sha256(str(configs).encode()).hexdigest()[:12]}'

        def stage_tree(stage: Path) -> None:
            (stage / 'configs').symlink_to(configs)
            for entry in source.iterdir():  # copied: `..` from inside a symlinked folder would leave the stage
                shutil.copytree(entry, stage / entry.name)

        if not root.is_dir():
            _publish(root, stage_tree)
        return root / inner
    return source / inner


def resolve(path: str) -> Path:
    """`scope::rel/path.py` -> the installed package's `.mim/configs/rel/path.py` (`vendor::`: `_vendor_file`);
    a plain path as is."""
    if '::' not in path:
        file = Path(path)
    else:
        scope, rel = path.split('::', 1)
        if scope not in ANCHOR_SCOPES:
            raise InputError(
                f'anchor {path!r}: unknown scope {scope!r}; allowed: {", ".join(ANCHOR_SCOPES)} '
                '(or a path to a config file)'
            )
        file = _vendor_file(rel) if scope == 'vendor' else _package_configs(scope) / rel
    if not file.is_file():
        raise InputError(f'config {path!r}: no such file ({file})')
    return file


def load(path: str, import_custom_modules: bool = True) -> dict[str, Any]:
    """A config file as plain dicts: mmengine's `Config.fromfile`, or detectron2's `LazyConfig.load` (its module-level
    dicts, `recipe` among them; interpolations such as `${..lr}` kept as text) for a LazyConfig."""
    file = resolve(path)
    if not is_lazy_config(file):
        return Config.fromfile(str(file), import_custom_modules=import_custom_modules).to_dict()
    from detectron2.config import LazyConfig  # only for a LazyConfig: detectron2 is optional
    from omegaconf import OmegaConf

    return OmegaConf.to_container(LazyConfig.load(str(file)), resolve=False)


def recipe_of(cfg: dict, path: str) -> dict:
    recipe = cfg.get('recipe')
    if not isinstance(recipe, dict) or 'anchor' not in recipe:
        raise InputError(
            f'{path} is not a recipe: it has no `recipe = dict(anchor=..., intended={{...}})` '
            '(see tools/analysis_tools/recipe_diff.py)'
        )
    return recipe


def intended_of(recipe: dict) -> dict[str, str]:
    """The recipe's intended differences {pattern: why}, withdrawn (None) entries dropped."""
    return {p: why for p, why in recipe.get('intended', {}).items() if why is not None}


def unexpected(found: dict[str, tuple[Any, Any]], expected: dict[str, Any]) -> dict[str, str]:
    """{key: why} where a listed difference's value of ours is not the one the recipe's `expected` states
    (a difference by design, e.g. AdamW's lr against an SGD anchor, can still be the wrong value)."""
    out = {}
    for key, value in flatten(expected).items():
        ours = found.get(key, (ABSENT,))[0]
        if ours != value:
            out[key] = f'the recipe expects {value!r}' + ('' if key in found else ' (not a difference)')
    return out


def specificity(pattern: str) -> tuple[int, int]:
    """Sort key of a pattern, most specific first: fewer wildcard characters, then more literal characters."""
    wild = sum(pattern.count(c) for c in '*?[')
    return wild, -len(re.sub(r'\[[^]]*\]|[*?]', '', pattern))


def listed_by(key: str, intended: dict[str, str]) -> str | None:
    """The most specific pattern that matches `key` (None: not listed). mmengine merges a derived recipe's entries
    after its base's, so the first match in order could be a base's wildcard written for the base's own keys."""
    matches = sorted((p for p in intended if fnmatch.fnmatchcase(key, p)), key=specificity)
    return matches[0] if matches else None


def config_files(path: str) -> list[Path]:
    """`path` and the local files of its `_base_` chain, derived first (a `scope::` base is not ours)."""
    files, todo = [], [Path(path)]
    while todo:
        file = todo.pop(0)
        if file in files or not file.is_file():
            continue
        files.append(file)
        for node in ast.parse(file.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == '_base_' for t in node.targets):
                with contextlib.suppress(ValueError):  # a computed _base_ (LazyConfigs have none)
                    bases = ast.literal_eval(node.value)
                    bases = [bases] if isinstance(bases, str) else bases
                    todo += [file.parent / b for b in bases if '::' not in b]
    return files


def above(why: str, pattern: str, files: list[Path]) -> str:
    """`why` with its "(above)" (a comment above the setting, in a config the reader does not see here) replaced
    by where that setting is: the first file of `files` that lists `pattern` and assigns its top-level key."""
    if '(above)' not in why:
        return why
    top = re.split(r'[.\[*?]', pattern, maxsplit=1)[0]
    for file in files:
        text = file.read_text()
        if repr(pattern) in text or f'"{pattern}"' in text:
            found = re.search(rf'^{re.escape(top)}\s*=', text, re.M)
            if found:
                line = text.count('\n', 0, found.start()) + 1
                return why.replace('(above)', f'(the comment above {top} in {os.path.relpath(file)}:{line})')
    return why.replace('(above)', f'(a comment in {os.path.relpath(files[0])})')


class Comparison(NamedTuple):
    found: dict[str, tuple[Any, Any]]  # {key: (ours, anchor)}
    unlisted: dict[str, str]  # {key: why}: differences the recipe does not list, or not at its `expected`
    stale: dict[str, str]  # {pattern: why}: listed differences that are not found
    intended: dict[str, str]  # {pattern: why}: what the recipe lists


def compare(ours_path: str, anchor_path: str | None = None) -> Comparison:
    """A recipe against its (or the given) anchor."""
    ours = load(ours_path)
    recipe = recipe_of(ours, ours_path)
    anchor = load(anchor_path or recipe['anchor'], import_custom_modules=False)
    intended = intended_of(recipe)
    found = diff({k: v for k, v in ours.items() if k != 'recipe'}, anchor, recipe.get('key_map'))
    unlisted = {k: '' for k in found if not any(fnmatch.fnmatchcase(k, p) for p in intended)}
    unlisted.update(unexpected(found, recipe.get('expected', {})))
    stale = {p: why for p, why in intended.items() if not any(fnmatch.fnmatchcase(k, p) for k in found)}
    return Comparison(found, unlisted, stale, intended)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('ours', help='a recipe of ours (a config with `recipe = dict(anchor=..., intended=...)`)')
    parser.add_argument(
        'anchor',
        nargs='?',
        help="the anchor config (default: the recipe's own anchor); "
        f'a path or `scope::path` with scope one of {", ".join(ANCHOR_SCOPES)}',
    )
    parser.add_argument(
        '--check',
        action='store_true',
        help='exit 1 if a difference is not listed in the recipe or a listed one is not found',
    )
    args = parser.parse_args(argv)
    with bad_input('tools/analysis_tools/recipe_diff.py'):  # a missing config or anchor, not a recipe: one line
        found, unlisted, stale, intended = compare(config_file(args.ours), args.anchor)
        anchor = args.anchor or recipe_of(load(args.ours), args.ours)['anchor']
    files = config_files(args.ours)
    print(f'ours:   {args.ours}')
    print(f'anchor: {anchor} ({resolve(anchor)})' if '::' in anchor else f'anchor: {anchor}')
    print("each line: key  ours=<ours'>  anchor=<the anchor's>  # the reason the recipe lists (recipe['intended'])\n")
    width = max((len(k) for k in found), default=0)
    for key, (va, vb) in found.items():
        pattern = listed_by(key, intended)
        if unlisted.get(key):
            why = f'NOT AS EXPECTED: {unlisted[key]}'
        else:
            why = 'NOT LISTED' if pattern is None else above(intended[pattern], pattern, files)
        print(f'{key:<{width}}  ours={va!r}  anchor={vb!r}  # {why}')
    for key in unlisted.keys() - found.keys():
        print(f'{key}: {unlisted[key]}')
    for pattern in stale:
        print(f'STALE: {pattern!r} is listed as intended but matches no difference')
    print(f'{len(found)} differences, {len(unlisted)} not listed, {len(stale)} stale entries')
    return 1 if args.check and (unlisted or stale) else 0


if __name__ == '__main__':
    sys.exit(main())
