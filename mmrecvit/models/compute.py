"""The one test-time compute knob (issue 20): `compute`, a fraction in (0, 1] of full-depth FLOPs.

Every backbone takes `compute: float | None = None`, as a default (constructor argument or attribute) and per
call (`forward(x, compute=...)`). None is the default forward, unchanged. A fraction c asks for at most c x
the backbone's *full-depth* FLOPs at the size of the input at hand (every block application of the full
schedule over every token: the dense upper bound of the method, as `flops.py` counts it, patch embedding and
routers included). Each method maps c onto its own mechanism through its settings, each counted by the FLOP plan
derived from its schedule (`ViTBackbone.compute_settings`, `ViTBackbone.within`, `schedule.py`; each class
docstring says how):

* it lists its achievable settings from the smallest to its own current setting (the forward that
  `compute=None` runs, so `compute=1.0` is always exactly that forward),
* counts the FLOPs of each candidate's plan at the actual input size (the plan the forward would run),
* and runs the largest setting whose FLOPs are <= c x full (rounding down: never above the budget), or
  the smallest setting when none fits.

The FLOPs actually reached are the forward's own `stats.flops` (`model(x).stats`), as for every forward. A
token-adaptive method's own setting may already cost less than c x full (an Edge-RecViT ranker or MoR-ViT's
default capacities run well below full depth): the knob only cuts, so such fractions give the default
forward, and `stats.flops` says what it cost. The knob acts in eval mode only: a forward in training mode
with `compute` set is an error (a test-time knob never changes training silently).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

from .checks import check_float

COMPUTE_RANGE = '(0, 1]'
# Relative slack when comparing FLOPs with the budget: compute=1.0 must admit the full setting itself.
_SLACK = 1e-9


def check_compute(value: Any) -> float | None:
    """`compute`: None, or a number in (0, 1] (the error names `compute` and the range)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f'compute must be None or a number in {COMPUTE_RANGE} (a fraction of the full-depth '
            f'backbone FLOPs), got {type(value).__name__} {value!r}'
        )
    return check_float('compute', value, 0, 1, low_open=True)  # "... in (0, 1], got ..."


def largest_within(fraction: float, full_flops: float, flops_of: Callable[[int], float], num: int) -> int:
    """Index of the largest of `num` settings whose FLOPs are <= `fraction` x `full_flops` (0 if none).

    Settings are indexed from the smallest (0) to the largest (num - 1) and `flops_of(i)` must not
    decrease with i (every method's list does), so a bisection needs O(log num) evaluations.
    """
    budget = fraction * full_flops * (1 + _SLACK)
    if flops_of(num - 1) <= budget:
        return num - 1
    lo, hi = 0, num - 1  # flops_of(hi) > budget
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if flops_of(mid) <= budget else (lo, mid)
    return lo
