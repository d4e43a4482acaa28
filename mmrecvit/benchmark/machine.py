"""The machine and software a benchmark ran on: what a reader needs to reproduce its numbers."""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path

import torch


def physical_cores() -> int:
    """Physical CPU cores available to this process (hyper-threads not counted)."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else (os.cpu_count() or 1)
    cores = set()
    try:
        phys = core = None
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            key, _, value = line.partition(':')
            key = key.strip()
            if key == 'physical id':
                phys = value.strip()
            elif key == 'core id':
                core = value.strip()
            elif not key and core is not None:
                cores.add((phys, core))
                phys = core = None
        if core is not None:
            cores.add((phys, core))
    except OSError:
        pass
    return max(1, min(available, len(cores) if cores else available))


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where available)."""
    with contextlib.suppress(OSError):
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            if line.startswith('model name'):
                return line.partition(':')[2].strip()
    return platform.processor() or platform.machine()


def _versions() -> str:
    parts = []
    for dist in ('torch', 'timm', 'mmengine', 'mmcv', 'mmdet', 'mmsegmentation'):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            parts.append(f'{dist} {importlib.metadata.version(dist)}')
    return ', '.join(parts)


def _git_commit(checkout: str | Path) -> str:
    """The short commit of the git checkout at `checkout` ('unknown' when it is none)."""
    try:
        out = subprocess.run(
            ['git', 'rev-parse', '--short', 'HEAD'],
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return 'unknown'
    return out.stdout.strip() or 'unknown'


def mmrecvit_version(checkout: str | Path | None = None) -> str:
    """What names mmrecvit in a report: the commit of `checkout`, the repository the caller runs from
    (tools/analysis_tools/benchmark.py passes its own), or without one the package's version. The package
    does not guess a repository from where it is installed (an installed wheel lives in none)."""
    if checkout is not None:
        return _git_commit(checkout)
    from .. import __version__

    return __version__


def environment(
    device: str, threads: int, run: Mapping[str, str] | None = None, checkout: str | Path | None = None
) -> dict[str, str]:
    """What a reader needs to reproduce the numbers: the machine, `run` (what was timed, in the report's words),
    the software (`checkout`: see `mmrecvit_version`) and the load."""
    dev = torch.device(device)
    if dev.type == 'cuda':
        where = f'cuda ({torch.cuda.get_device_name(dev)})'
    else:
        where = f'cpu ({cpu_model()}, {physical_cores()} physical cores, {os.cpu_count()} logical)'
    env = {
        'date': datetime.datetime.now().astimezone().isoformat(timespec='seconds'),
        'device': where,
        'threads': str(threads),
        **(run or {}),
        'software': f'Python {platform.python_version()}, {_versions()}, mmrecvit {mmrecvit_version(checkout)}',
    }
    if hasattr(os, 'getloadavg'):
        env['load average at start'] = ', '.join(f'{v:.2f}' for v in os.getloadavg())
    return env
