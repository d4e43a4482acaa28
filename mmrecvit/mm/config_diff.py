"""Key-by-key differences between two configs read as plain dicts (`tools/analysis_tools/recipe_diff.py`).

    diff(ours, anchor, key_map)   {dotted key: (ours, anchor)} of every key whose values differ; ABSENT where a
                                  side lacks it
    flatten(config)               nested dicts/lists -> {dotted key: leaf}

A pipeline (a list of dicts with `type`, or of detectron2 LazyCalls with `_target_`) is keyed by step type, so an
inserted step is one difference (`train_pipeline.CheckSegMap`) rather than a shift of every index after it, and a
step's parameters are `train_pipeline.RandomCrop.crop_size`; mmengine's registry bookkeeping (`_scope_`) is not a
difference. Written by hand: mmengine compares no two configs (`Config.diff` shows text lines, not keys).
"""

from __future__ import annotations

import functools
from typing import Any

ABSENT = '<absent>'


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
    return dict(sorted(_subtrees(out, a, b).items()))


def _subtrees(out: dict[str, tuple[Any, Any]], a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """A key that is a plain value on one side and a subtree on the other (`model.neck`: None against a dict) is
    shown once, as the subtree's keys with the other side `<absent: model.neck=None>`, not also as the parent line
    `model.neck ours=<absent>` beside its own children."""
    for key, (va, vb) in list(out.items()):
        side = 0 if va == ABSENT else 1 if vb == ABSENT else None
        if side is None or not any(k.startswith((f'{key}.', f'{key}[')) for k in (a, b)[side]):
            continue
        del out[key]
        for child, pair in out.items():
            if child.startswith((f'{key}.', f'{key}[')) and pair[1 - side] == ABSENT:
                pair = list(pair)
                pair[1 - side] = f'<absent: {key}={(va, vb)[1 - side]!r}>'
                out[child] = tuple(pair)
    return out
