"""Model specs: what the command line names, parsed into `ModelSpec`s without evaluating anything.

Each spec is optionally labelled `label=SPEC`:

* `ClassName(kw=literal, ...)`: a backbone of `mmrecvit.models.BACKBONES`;
* `timm:model_name(kw=literal, ...)`: a timm model;
* `path/to/config.py(kw=literal, ...)`: the backbone of an mmengine config (kwargs override
  `cfg.model.backbone`), or with `whole=True` the whole detector/segmentor.

Kwargs are parsed with `ast` and must be Python literals: nothing is evaluated, so a spec cannot
run code. How each kind is built and timed: `build.py`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class SpecError(ValueError):
    """A model spec that cannot be parsed or built; the message names the spec."""


@dataclass(frozen=True)
class ModelSpec:
    """One model given on the command line.

    text: the spec as typed (label included).
    label: the name used in tables and for `--reference`.
    kind: 'backbone' (a `BACKBONES` class), 'timm' or 'config'.
    target: the class name, the timm model name or the config path.
    kwargs: literal keyword arguments (constructor arguments or overrides of the config's backbone,
        and the harness kwargs of `forcing.py`).
    """

    text: str
    label: str
    kind: str
    target: str
    kwargs: dict[str, Any] = field(default_factory=dict)


# A label is anything before the first '=' that cannot belong to a call, a path or a timm name.
_LABEL = re.compile(r'^\s*([^=()\[\]{}:/\\\'"]+?)\s*=(?!=)(.*)$', re.S)


def parse_kwargs(args: str, spec: str) -> dict[str, Any]:
    """`"a=1, b=(2, 3)"` -> `{'a': 1, 'b': (2, 3)}`; only keyword arguments with literal values."""
    if not args.strip():
        return {}
    try:
        tree = ast.parse(f'_({args})', mode='eval')
    except SyntaxError as e:
        raise SpecError(f'model spec {spec!r}: cannot parse the arguments {args!r} ({e.msg})') from None
    call = tree.body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == '_'):
        raise SpecError(f'model spec {spec!r}: the arguments {args!r} are not one argument list')
    if call.args:
        raise SpecError(
            f'model spec {spec!r}: positional arguments are not allowed '
            f'({ast.unparse(call.args[0])!r}); write name=value'
        )
    kwargs = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise SpecError(f'model spec {spec!r}: **{ast.unparse(kw.value)} is not allowed; write name=value')
        try:
            kwargs[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise SpecError(
                f'model spec {spec!r}: the value of {kw.arg!r} must be a Python literal (number, '
                'string, tuple, list, dict, set, True/False/None), got '
                f'{ast.unparse(kw.value)!r}'
            ) from None
    return kwargs


def parse_spec(text: str) -> ModelSpec:
    """Parse `[label=]ClassName(...)`, `[label=]timm:name(...)` or `[label=]path/config.py(...)`."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError(f'model spec {text!r} is empty')
    label = None
    body = text.strip()
    m = _LABEL.match(body)
    if m:
        label, body = m.group(1).strip(), m.group(2).strip()
        if not body:
            raise SpecError(f'model spec {text!r}: nothing after the label {label!r}')
    args = ''
    if body.endswith(')'):
        i = body.find('(')
        if i <= 0:
            raise SpecError(f'model spec {text!r}: unbalanced parentheses')
        name, args = body[:i].strip(), body[i + 1 : -1]
    else:
        name = body
    if any(c in name for c in '()'):
        raise SpecError(f'model spec {text!r}: unbalanced parentheses')
    kwargs = parse_kwargs(args, text)
    if name.startswith('timm:'):
        kind, target = 'timm', name[len('timm:') :].strip()
        if not target:
            raise SpecError(f'model spec {text!r}: timm: needs a model name, e.g. timm:vit_small_patch16_224')
    elif name.endswith('.py'):
        kind, target = 'config', name
    elif name.isidentifier():
        kind, target = 'backbone', name
    else:
        raise SpecError(
            f'model spec {text!r}: {name!r} is not a backbone class name, timm:NAME or a config path ending in .py'
        )
    if label is None:
        if kind == 'config':
            label = Path(target).stem + (f'({args.strip()})' if args.strip() else '')
        else:
            label = ' '.join(body.split())
    if kind == 'config' and 'whole' in kwargs and not isinstance(kwargs['whole'], bool):
        raise SpecError(f'model spec {text!r}: whole must be True or False, got {kwargs["whole"]!r}')
    return ModelSpec(text=text, label=label, kind=kind, target=target, kwargs=kwargs)


def parse_specs(texts: Sequence[str]) -> list[ModelSpec]:
    """Parse all specs; labels must be unique."""
    specs = [parse_spec(t) for t in texts]
    seen: dict[str, str] = {}
    for s in specs:
        if s.label in seen:
            raise SpecError(
                f'model specs {seen[s.label]!r} and {s.text!r} have the same label {s.label!r}; '
                'name them with label=SPEC'
            )
        seen[s.label] = s.text
    return specs
