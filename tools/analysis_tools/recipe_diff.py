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
detectron2 LazyConfigs (configs/d2, detectron2's projects/ViTDet): a file that imports detectron2 or mmrecvit.d2, or
imports relatively (how LazyConfigs derive), is read with `LazyConfig.load`: its module-level dicts, `recipe` among
them (`__all__` is not read; a derived file imports the base's `recipe` and updates it, None withdrawing an entry).
A `_target_` (or any class or function) compares as its qualified name (`detectron2.modeling.backbone.vit.ViT`), a
`functools.partial` as a LazyCall, and a list of LazyCalls as a pipeline keyed by the `_target_`'s short name
(`dataloader.train.mapper.augmentations.ResizeScale.max_scale`).
Written by hand because mmengine compares no two configs (one line: `Config.diff` shows text lines, not keys).
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import importlib.util
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from mmengine import Config

from mmrecvit.mm.tooling import is_lazy_config

ABSENT = '<absent>'
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
        raise ValueError(f'anchor scope {package!r}: the package is not installed')
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
    `<folder>/<path>` (a tree in VENDOR_BASES is staged with its package's configs as `configs/`)."""
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
        root = CACHE / top

        def stage_tree(stage: Path) -> None:
            (stage / 'configs').symlink_to(_package_configs(VENDOR_BASES[top]))
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
            raise ValueError(
                f'anchor {path!r}: unknown scope {scope!r}; allowed: {", ".join(ANCHOR_SCOPES)} '
                '(or a path to a config file)'
            )
        file = _vendor_file(rel) if scope == 'vendor' else _package_configs(scope) / rel
    if not file.is_file():
        raise FileNotFoundError(f'config {path!r}: no such file ({file})')
    return file


def _step_type(step: Any) -> str | None:
    """An mmengine step's `type`, a LazyCall's `_target_` short name (`T.RandomFlip` -> `RandomFlip`), else None."""
    if not isinstance(step, dict):
        return None
    if 'type' in step:
        return str(step['type'])
    return None if '_target_' not in step else _qualname(step['_target_']).rpartition('.')[2]


def _is_pipeline(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(_step_type(v) is not None for v in value)


def _step_names(steps: list[dict]) -> list[str]:
    """Step types, with `#k` on the k-th repeat of a type (`Pad`, `Pad#2`)."""
    seen: dict[str, int] = {}
    names = []
    for step in steps:
        t = _step_type(step)
        seen[t] = seen.get(t, 0) + 1
        names.append(t if seen[t] == 1 else f'{t}#{seen[t]}')
    return names


def _qualname(value: Any) -> str:
    """A class or function -> `module.QualName` (a LazyConfig's `_target_`); text as is."""
    if isinstance(value, str) or not hasattr(value, '__qualname__'):
        return str(value)
    return f'{value.__module__}.{value.__qualname__}'


def flatten(value: Any, prefix: str = '') -> dict[str, Any]:
    """Nested dicts/lists -> {dotted key: leaf}; pipelines keyed by step type (see the module docstring);
    a class or function as its qualified name, a `functools.partial` as a LazyCall (`_target_`, its arguments)."""
    if isinstance(value, functools.partial):
        value = {'_target_': value.func, **dict(enumerate(value.args)), **value.keywords}
    if callable(value) and hasattr(value, '__qualname__'):
        return {prefix: _qualname(value)}
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k != '_scope_':
                out.update(flatten(v, f'{prefix}.{k}' if prefix else str(k)))
        return out
    if _is_pipeline(value):
        out = {}
        for name, step in zip(_step_names(list(value)), value):
            out.update(flatten(step, f'{prefix}.{name}'))
        return out
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, (dict, list, tuple)) for v in value):
            out = {}
            for i, v in enumerate(value):
                out.update(flatten(v, f'{prefix}[{i}]'))
            return out
        return {prefix: list(value)}
    return {prefix: value}


def _pipelines(value: Any, prefix: str = '') -> dict[str, list[str]]:
    """{pipeline key: its step names in order}, walking as `flatten` does."""
    if _is_pipeline(value):
        return {prefix: _step_names(list(value))}
    items = (
        value.items()
        if isinstance(value, dict)
        else (((f'[{i}]', v) for i, v in enumerate(value)) if isinstance(value, (list, tuple)) else ())
    )
    out: dict[str, list[str]] = {}
    for k, v in items:
        out.update(_pipelines(v, (f'{prefix}{k}' if k.startswith('[') else f'{prefix}.{k}') if prefix else k))
    return out


def renamed(keys: dict[str, Any], key_map: dict[str, str]) -> dict[str, Any]:
    """Keys starting with a `key_map` prefix get the anchor's prefix instead (the longest prefix that matches)."""
    prefixes = sorted(key_map, key=len, reverse=True)

    def rename(key: str) -> str:
        p = next((p for p in prefixes if key == p or key.startswith(p)), None)
        return key if p is None else key_map[p] + key[len(p) :]

    out = {rename(k): v for k, v in keys.items()}
    if len(out) != len(keys):
        raise ValueError(f'key_map {key_map}: two of our keys map to one anchor key')
    return out


def diff(
    ours: dict[str, Any], anchor: dict[str, Any], key_map: dict[str, str] | None = None
) -> dict[str, tuple[Any, Any]]:
    """{key: (ours, anchor)} for every key whose values differ (ABSENT where a side lacks it), our keys
    renamed by `key_map` {our prefix: the anchor's} where the two configs name one thing differently.

    A pipeline step present on one side only is one entry, `<pipeline>.<Step>`, and its parameters are
    not listed again; a reordering of the steps is an entry `<pipeline>` with both orders."""
    key_map = key_map or {}
    a, b = renamed(flatten(ours), key_map), flatten(anchor)
    out: dict[str, tuple[Any, Any]] = {}
    one_sided: list[str] = []
    steps_a, steps_b = renamed(_pipelines(ours), key_map), _pipelines(anchor)
    for pipe in set(steps_a) & set(steps_b):
        sa, sb = steps_a[pipe], steps_b[pipe]
        for name in set(sa) ^ set(sb):
            out[f'{pipe}.{name}'] = ('step' if name in sa else ABSENT, 'step' if name in sb else ABSENT)
            one_sided.append(f'{pipe}.{name}.')
        common = [s for s in sa if s in sb]
        if common != [s for s in sb if s in sa]:
            out[pipe] = (' > '.join(sa), ' > '.join(sb))
    for key in sorted(set(a) | set(b)):
        if any(key.startswith(p) for p in one_sided):
            continue
        va, vb = a.get(key, ABSENT), b.get(key, ABSENT)
        if va != vb:
            out[key] = (va, vb)
    return dict(sorted(out.items()))


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
        raise ValueError(
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
    found, unlisted, stale, intended = compare(args.ours, args.anchor)
    width = max((len(k) for k in found), default=0)
    for key, (va, vb) in found.items():
        why = (
            f'NOT AS EXPECTED: {unlisted[key]}'
            if unlisted.get(key)
            else next((w for p, w in intended.items() if fnmatch.fnmatchcase(key, p)), 'NOT LISTED')
        )
        print(f'{key:<{width}}  ours={va!r}  anchor={vb!r}  # {why}')
    for key in unlisted.keys() - found.keys():
        print(f'{key}: {unlisted[key]}')
    for pattern in stale:
        print(f'STALE: {pattern!r} is listed as intended but matches no difference')
    print(f'{len(found)} differences, {len(unlisted)} not listed, {len(stale)} stale entries')
    return 1 if args.check and (unlisted or stale) else 0


if __name__ == '__main__':
    sys.exit(main())
