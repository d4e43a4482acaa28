"""Constructor-argument validation: every error names the argument and what is allowed."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any


def check_int(name: str, value: Any, min_value: int | None = None, max_value: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f'{name} must be an int, got {type(value).__name__} {value!r}')
    lo = '-inf' if min_value is None else min_value
    hi = 'inf' if max_value is None else max_value
    if (min_value is not None and value < min_value) or (max_value is not None and value > max_value):
        raise ValueError(f'{name} must be an int in [{lo}, {hi}], got {value}')
    return int(value)


def check_float(
    name: str, value: Any, low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f'{name} must be a number, got {type(value).__name__} {value!r}')
    value = float(value)
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high or not math.isfinite(value):  # NaN and +-inf are never a setting
        opens = '(' if low_open or math.isinf(low) else '['
        closes = ')' if high_open or math.isinf(high) else ']'
        raise ValueError(f'{name} must be a finite number in {opens}{low}, {high}{closes}, got {value}')
    return value


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f'{name} must be True or False, got {type(value).__name__} {value!r}')
    return value


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    if value not in choices:
        raise ValueError(f'{name} must be one of {list(choices)}, got {value!r}')
    return value


def check_sequence(name: str, value: Any, *, min_len: int = 1) -> list:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f'{name} must be a list or tuple, got {type(value).__name__} {value!r}')
    if len(value) < min_len:
        raise ValueError(f'{name} must have at least {min_len} element(s), got {list(value)}')
    return list(value)


def check_renamed(owner: str, kwargs: dict[str, Any], renamed: dict[str, str]) -> None:
    """An old argument spelling is an error naming the new one, never a silent change of meaning.

    renamed: old name -> what to pass instead (a name, or a sentence).
    """
    for old, new in renamed.items():
        if old in kwargs:
            raise TypeError(f'{owner}: the argument {old!r} is no longer accepted; use {new} instead')
