"""What a check of the GPU check (`gpu_check.py`) yields: one `Result` per case, and how a case becomes one."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

REPO = Path.cwd().resolve()  # the checkout it runs from (scripts/gpu_check.sh cds there): configs/, tools/, work_dirs/


@dataclass
class Setup:
    """Where and how big: `device` cuda or cpu; `quick`: tiny models and few cases (CI); `work`: scratch files."""

    device: torch.device
    quick: bool
    work: Path

    @property
    def cuda(self) -> bool:
        return self.device.type == 'cuda'


@dataclass
class Result:
    """One case of a check: what it measured against its threshold. `passed` None: skipped (`measured` says why).
    `timing`: a timing, which the CI test never asserts (timings belong to benchmarks, not to pass/fail tests)."""

    check: str
    case: str
    measured: str
    threshold: str
    passed: bool | None
    timing: bool = False

    @property
    def id(self) -> str:
        return f'{self.check}/{self.case}'

    @property
    def status(self) -> str:
        return 'SKIP' if self.passed is None else 'PASS' if self.passed else 'FAIL'


def at_most(check: str, case: str, value: float, limit: float, fmt: str = '.3g', unit: str = '', **kw) -> Result:
    return Result(check, case, f'{value:{fmt}}{unit}', f'<= {limit:{fmt}}{unit}', value <= limit, **kw)


def at_least(check: str, case: str, value: float, limit: float, fmt: str = '.3g', unit: str = '', **kw) -> Result:
    return Result(check, case, f'{value:{fmt}}{unit}', f'>= {limit:{fmt}}{unit}', value >= limit, **kw)


def failed(check: str, case: str, error: BaseException, threshold: str = 'runs') -> Result:
    """A case whose code raised: FAIL with the error's first line."""
    text = str(error).strip().splitlines()
    return Result(check, case, f'{type(error).__name__}: {text[0][:200] if text else ""}', threshold, False)


def skipped(check: str, case: str, why: str) -> Result:
    return Result(check, case, why, '-', None)


def guarded(check: str, case: str, fn: Callable[[], Iterable[Result]], threshold: str = 'runs') -> Iterator[Result]:
    """`fn()`'s results as they come, and one FAIL naming what it raised if it raises (the traceback's last frames
    printed): a crash is that case's result, and the other cases go on."""
    try:
        yield from fn()
    except Exception as error:
        traceback.print_exc(limit=-4)  # where it raised, not the whole stack
        yield failed(check, case, error, threshold)
