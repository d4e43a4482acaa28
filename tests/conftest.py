"""The suite's fixtures and markers.

Layout: tests/ mirrors the package (models/, mm/, d2/, timm/, datasets/, benchmark/, deploy; test_package.py
the package as a whole), plus tools/, configs/, scripts/ and e2e/ (trainings, distributed runs, kill/resume).
Markers (setup.cfg):

* `e2e`: everything under tests/e2e/ (set here from the path);
* `dist`: more than one process in a process group (gloo);
* `subprocess`: starts a fresh Python or shell process;
* `slow`: the slow tier: exports, compiles, sweeps over every config, real-size recipes, fresh venvs, and the
  runs of their own of 30 s or more through a tool or launcher (what the session's shared runs cost is not counted).

`make test` runs all but `slow`, `make test TIER=slow` the `slow` tier, `TIER=all` both (CI); `make test-fast` only
the rest (unit tests). The trained toy runs that several e2e tests read are session fixtures made once per run
(tests/e2e/conftest.py). `make test` distributes files over the cores (`--dist loadfile`): the tests of one file
run in one worker, so the runs a file's tests share are made there; a run two files share is made once, the other
worker waits for it on a file lock (`helpers.once`).
"""

import os
import sys
from pathlib import Path

import pytest
import torch

import mmrecvit.mm  # noqa: F401  (before any test module imports mmdet/mmpretrain: compat fix 5)
from mmrecvit.benchmark.machine import physical_cores

sys.path.insert(0, os.path.dirname(__file__))  # helpers.py, backbone_cases.py

from helpers import once, one_deterministic_thread  # noqa: E402

if os.environ.get('MMRECVIT_CPU_TIMES'):  # each test's wall and CPU time, to a folder (tests/cpu_times.py)
    from cpu_times import pytest_runtest_protocol  # noqa: E402, F401


def _share_the_cores() -> None:
    """Under pytest-xdist, each worker's torch (and the processes it starts) gets its share of the physical cores:
    torch's default, a thread per core in every worker, oversubscribes them (the suite's time before and after:
    docs/development.md). Set OMP_NUM_THREADS yourself to override."""
    workers = int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1'))
    if workers > 1 and 'OMP_NUM_THREADS' not in os.environ:
        threads = max(1, physical_cores() // workers)
        os.environ['OMP_NUM_THREADS'] = str(threads)
        torch.set_num_threads(threads)


_share_the_cores()


def pytest_collection_modifyitems(config, items):
    e2e = os.path.join(os.path.dirname(__file__), 'e2e') + os.sep
    for item in items:
        if str(item.path).startswith(e2e):
            item.add_marker(pytest.mark.e2e)
    # Files with long tests first (e2e, then slow/dist/subprocess ones), the rest keeping their order. xdist
    # (3.8, requirements.txt) hands out the files with the most tests first (its default `--loadscope-reorder`), this
    # order among files of as many tests. Turned off, so that this order alone decides, the whole suite took 20 min
    # 13 s against 19 min 0 s with it on (one run each, 2026-12-07, docs/development.md): xdist's stays on.
    weight = {}
    for item in items:
        marks = {m.name for m in item.iter_markers()}
        rank = 0 if 'e2e' in marks else 1 if marks & {'slow', 'dist', 'subprocess'} else 2
        weight[item.path] = min(weight.get(item.path, 2), rank)
    items.sort(key=lambda item: weight[item.path])


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture(scope='module')
def one_thread():
    """Tiny models gain nothing from intra-op threads; on a busy shared machine they only contend.
    Modules use it with `pytestmark = pytest.mark.usefixtures('one_thread')`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def deterministic_torch():
    """One thread, and torch's deterministic flag put back afterwards (`helpers.one_deterministic_thread`)."""
    with one_deterministic_thread():
        yield


@pytest.fixture(scope='session')
def toy_root(tmp_path_factory):
    """A small copy of the toy datasets (COCO, ADE20K: 8 train / 4 val images, 128 px; classification:
    10 train / 5 val, 64 px), written once per run for every worker."""
    from mmrecvit.datasets import make_toy_data

    def make(root):
        make_toy_data(
            root, size=128, coco_train=8, coco_val=4, ade_train=8, ade_val=4, cls_train=10, cls_val=5, progress=False
        )
        return str(root)

    return Path(once(tmp_path_factory, 'toy', make))
