"""Constructor-argument validation: every error names the argument and what is allowed.

A refused argument raises an `ArgumentError` (also a TypeError or ValueError, as Python would raise): the
tools print it as one line (`mmrecvit.inputs.bad_input`) instead of a traceback.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any


class ArgumentError(Exception):
    """Bad input a user gave (an argument's name or value, a file): its message is the whole story."""


class ArgumentTypeError(ArgumentError, TypeError):
    pass


class ArgumentValueError(ArgumentError, ValueError):
    pass


def closest(name: str, candidates: Sequence[str], n: int = 3) -> list[str]:
    """The candidates that look most like `name` (difflib; case-insensitive), best first."""
    lower = {c.lower(): c for c in candidates}
    return [lower[c] for c in difflib.get_close_matches(name.lower(), list(lower), n=n, cutoff=0.6)]


def accepted_keywords(cls: type) -> list[str]:
    """The keyword arguments `cls(...)` accepts: the named parameters of each `__init__` along its MRO, as far as
    each passes the rest on with `**kwargs`."""
    names: list[str] = []
    for klass in cls.__mro__:
        if '__init__' not in vars(klass):
            continue
        params = inspect.signature(inspect.unwrap(vars(klass)['__init__'])).parameters.values()
        names += [p.name for p in params if p.name != 'self' and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return list(dict.fromkeys(names))


def check_keywords(cls: type, init: Callable, kwargs: Mapping[str, Any]) -> None:
    """Before `init` (an `__init__` of `cls`'s chain) runs: a keyword it does not take (it has no `**kwargs`) is
    one error naming `cls`, the keyword and the closest of the keywords `cls` accepts."""
    params = inspect.signature(init).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return  # it hands them on; the next __init__ of the chain decides
    unknown = [k for k in kwargs if k not in params or params[k].kind is inspect.Parameter.POSITIONAL_ONLY]
    if not unknown:
        return
    accepted = accepted_keywords(cls)
    near = {k: closest(k, accepted) for k in unknown}
    named = ', '.join(f'{k!r} (closest: {", ".join(map(repr, near[k]))})' if near[k] else repr(k) for k in unknown)
    rest = '' if all(near.values()) else f'; it accepts: {", ".join(sorted(accepted))}'
    plural = 's' if len(unknown) > 1 else ''
    raise ArgumentTypeError(f'{cls.__name__} got {"an " if not plural else ""}unknown argument{plural} {named}{rest}')


def default_of(cls: type, name: str) -> Any:
    """The default of keyword `name` along `cls`'s `__init__` chain (the first `__init__` that names it)."""
    for klass in cls.__mro__:
        if '__init__' in vars(klass):
            param = inspect.signature(inspect.unwrap(vars(klass)['__init__'])).parameters.get(name)
            if param is not None:
                return param.default
    raise KeyError(f'{cls.__name__} has no argument {name!r}')


def check_modes(cls: type, kwargs: Mapping[str, Any]) -> None:
    """`mode_arguments` of `cls` and its bases, {argument: (mode argument, the modes that ignore it)}: an argument
    given another value than its default while its mode argument (given, or its default) is one of those modes would
    have no effect; it is refused, naming the mode, instead of being silently ignored. (Its default value passes: an
    inherited config key that says nothing new.)"""
    table: dict[str, tuple[str, Sequence[Any]]] = {}
    for klass in reversed(cls.__mro__):
        table.update(vars(klass).get('mode_arguments', {}))
    for name, (mode, ignored_in) in table.items():
        value = kwargs[mode] if mode in kwargs else default_of(cls, mode)
        if name in kwargs and kwargs[name] != default_of(cls, name) and value in ignored_in:
            raise ArgumentValueError(
                f'{cls.__name__}: {name}={kwargs[name]!r} has no effect with {mode}={value!r}; '
                f'leave {name} out or choose another {mode}'
            )


def checked_keywords(init: Callable) -> Callable:
    """Decorate an `__init__` so that its keywords are checked before it runs: one it cannot take is refused by
    `check_keywords` (not Python's "got an unexpected keyword argument", which names neither the class built nor
    what it accepts), one with no effect in the mode chosen by `check_modes`."""

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        check_keywords(type(self), init, kwargs)
        check_modes(type(self), kwargs)
        init(self, *args, **kwargs)

    return checked


def check_int(name: str, value: Any, min_value: int | None = None, max_value: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f'{name} must be an int, got {type(value).__name__} {value!r}')
    lo = '-inf' if min_value is None else min_value
    hi = 'inf' if max_value is None else max_value
    if (min_value is not None and value < min_value) or (max_value is not None and value > max_value):
        raise ArgumentValueError(f'{name} must be an int in [{lo}, {hi}], got {value}')
    return int(value)


def check_float(
    name: str, value: Any, low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f'{name} must be a number, got {type(value).__name__} {value!r}')
    value = float(value)
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high or not math.isfinite(value):  # NaN and +-inf are never a setting
        opens = '(' if low_open or math.isinf(low) else '['
        closes = ')' if high_open or math.isinf(high) else ']'
        raise ArgumentValueError(f'{name} must be a finite number in {opens}{low}, {high}{closes}, got {value}')
    return value


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ArgumentTypeError(f'{name} must be True or False, got {type(value).__name__} {value!r}')
    return value


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    if value not in choices:
        raise ArgumentValueError(f'{name} must be one of {list(choices)}, got {value!r}')
    return value


def check_sequence(name: str, value: Any, *, min_len: int = 1) -> list:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ArgumentTypeError(f'{name} must be a list or tuple, got {type(value).__name__} {value!r}')
    if len(value) < min_len:
        raise ArgumentValueError(f'{name} must have at least {min_len} element(s), got {list(value)}')
    return list(value)


def check_renamed(owner: str, kwargs: dict[str, Any], renamed: dict[str, str]) -> None:
    """An old argument spelling is an error naming the new one, never a silent change of meaning.

    renamed: old name -> what to pass instead (a name, or a sentence).
    """
    for old, new in renamed.items():
        if old in kwargs:
            raise ArgumentTypeError(f'{owner}: the argument {old!r} is no longer accepted; use {new} instead')
