"""What several test folders share: paths, the one config cache, toy-run options, small comparisons.

Test modules import it as `helpers` (tests/conftest.py puts tests/ on sys.path; pytest runs with
`--import-mode=importlib`, so test modules never import each other: what two of them need lives here).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib
import json
import os
import os.path as osp
import socket
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))


@functools.cache
def _parsed(path: str):
    from mmengine.config import Config

    return Config.fromfile(path)


def cached_config(path: str):
    """`Config.fromfile(path)`, parsed once per test process (a copy: callers may change it)."""
    return copy.deepcopy(_parsed(osp.abspath(path)))


def toy_cfg_options(task: str, root, work_dir, iters: int = 2, batch: int = 2) -> list[str]:
    """--cfg-options that point a toy config at `toy_root` and shorten it to `iters` iterations."""
    from mmrecvit.datasets import toy_data_cfg

    common = [
        f'train_cfg.max_iters={iters}',
        f'train_cfg.val_interval={iters}',
        f'default_hooks.checkpoint.interval={iters}',
        f'train_dataloader.batch_size={batch}',
        'train_dataloader.num_workers=0',
        'train_dataloader.persistent_workers=False',
        'val_dataloader.num_workers=0',
        'val_dataloader.persistent_workers=False',
        'test_dataloader.num_workers=0',
        'test_dataloader.persistent_workers=False',
        'default_hooks.logger.interval=1',
    ]
    paths = [f'{k}={v}' for k, v in toy_data_cfg(task, root).items()]
    return ['--work-dir', str(work_dir), '--cfg-options', *common, *paths]


SUBPROCESS_ENV = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONWARNINGS': 'ignore'}


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """A command in the repository (or `cwd`), output captured (for the failure message), one thread per process."""
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, **{'cwd': REPO, 'env': SUBPROCESS_ENV, **kwargs}
    )


class one_deterministic_thread:
    """In-process trainings: one thread, and torch's deterministic flag (mmengine's
    `randomness.deterministic=True` switches it on) put back afterwards."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.use_deterministic_algorithms(False)
        torch.set_num_threads(self.threads)


def max_abs_diff(a: dict, b: dict) -> float:
    """Largest absolute difference between two state dicts with the same keys."""
    assert a.keys() == b.keys()
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def shared_dir(tmp_path_factory) -> Path:
    """A folder every pytest-xdist worker of this run sees (the run's base temp; without xdist, it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get('PYTEST_XDIST_WORKER') else base


def once(tmp_path_factory, name: str, make: Callable[[Path], Any]) -> Any:
    """`make(folder)` run once per test run, whichever xdist worker asks first; its JSON-able result.

    The other workers wait on a file lock and read the result: one training serves every test that
    needs it (`make test` keeps a file's tests in one worker, so only runs two files share contend).
    """
    from filelock import FileLock

    folder = shared_dir(tmp_path_factory) / name
    result = folder.with_name(f'{name}.json')
    with FileLock(f'{folder}.lock'):
        if not result.exists():
            folder.mkdir(parents=True, exist_ok=True)
            value = make(folder)
            result.write_text(json.dumps(value))
    return json.loads(result.read_text())


# ---- checkpoints (tests/mm, tests/tools) ---------------------------------------------------------------
def build_model(path, checkpoint, via='init_cfg'):
    """The detector/segmentor of a toy config, built by its framework's registry, whose backbone
    loads `checkpoint` through `init_cfg` or (mmseg) the segmentor's `pretrained`."""
    from mmengine.registry import init_default_scope

    cfg = cached_config(path)
    if via == 'init_cfg':
        cfg.model.backbone.init_cfg = dict(type='Pretrained', checkpoint=checkpoint)
    else:
        cfg.model.pretrained = checkpoint
        cfg.model.backbone.init_cfg = None
    init_default_scope(cfg.default_scope)
    model = importlib.import_module(f'{cfg.default_scope}.registry').MODELS.build(cfg.model)
    return cfg, model


def truncated(tmp_path, name='truncated.pth'):
    """A training checkpoint cut in half (a run killed while writing it)."""
    path = tmp_path / name
    torch.save({'state_dict': {'w': torch.zeros(1000)}, 'meta': {'iter': 2}}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return str(path)


# ---- detectron2 toys (tests/d2, tests/e2e) -------------------------------------------------------------
D2_TOY = f'{REPO}/configs/d2/toy/mask_rcnn_{{}}_ti_toy_coco.py'


def d2_toy_overrides(root, out, iters: int = 2, size: int = 128) -> list[str]:
    """detectron2 `key=value` overrides that point a toy LazyConfig at the tests' toy set, `iters`
    iterations at `size` px, evaluated at the end, output in `out` (as tools/d2_train_net.py takes them)."""
    pairs = [
        ('dataloader.train.dataset.names.root', f'{root}/toy_coco'),
        ('dataloader.test.dataset.names.root', f'{root}/toy_coco'),
        ('train.max_iter', iters),
        ('train.eval_period', iters),
        ('train.checkpointer.period', iters),
        ('train.log_period', 1),
        ('train.output_dir', out),
        ('dataloader.train.num_workers', 0),
        ('dataloader.test.num_workers', 0),
        ('model.backbone.square_pad', size),
    ]
    for split in ('train', 'test'):
        pairs += [(f'dataloader.{split}.mapper.augmentations.0.{k}', size) for k in ('short_edge_length', 'max_size')]
    return [f'{k}={v}' for k, v in pairs]


def d2_toy_cfg(method: str, root, out, config: str | None = None, **kwargs):
    """A toy LazyConfig (`config`, default the method's Mask R-CNN toy) with `d2_toy_overrides`."""
    from detectron2.config import LazyConfig

    return LazyConfig.apply_overrides(
        LazyConfig.load(config or D2_TOY.format(method)), d2_toy_overrides(root, out, **kwargs)
    )


def check_coco_scored(results: dict) -> None:
    """detectron2's COCOEvaluator results hold a bbox and a segm AP in [0, 100]."""
    import math

    for task in ('bbox', 'segm'):
        ap = results[task]['AP']
        assert isinstance(ap, float) and 0.0 <= ap <= 100.0 and not math.isnan(ap), results


# ---- the shared e2e runs (tests/e2e/conftest.py) --------------------------------------------------------
ITERS = 2  # iterations of the shared toy runs
REVIT_SEG = osp.join(REPO, 'configs/seg/upernet_revit-ti_1xb4-150it_toy-ade20k-256x256.py')
MORVIT_SEG = osp.join(REPO, 'configs/seg/upernet_morvit-ti_1xb4-150it_toy-ade20k-256x256.py')
REFERENCE_ITERS = 4  # the deterministic reference runs (resume, kill, distributed)
# Randomness on in the backbone (the toy configs leave drop path at 0); deterministic kernels.
DETERMINISTIC = ['randomness.seed=0', 'randomness.deterministic=True', 'model.backbone.drop_path_rate=0.1']


def revit_seg_options(root, work_dir, iters: int) -> list[str]:
    """The reViT toy UperNet of the resume and kill tests (tests/e2e/test_kill_resume.py), `DETERMINISTIC`, at its
    smallest: batch 1 and crops of the toy images' 128 px (the config's 2 x 256 px cost ~1.6 s more CPU per
    iteration, and the random resize, crop and flip still draw)."""
    small = [
        'train_dataloader.dataset.pipeline.3.scale=(160,128)',  # RandomResize
        'train_dataloader.dataset.pipeline.4.crop_size=(128,128)',  # RandomCrop
        'model.data_preprocessor.size=(128,128)',
    ]
    return [*toy_cfg_options('seg', root, work_dir, iters=iters, batch=1), *small, *DETERMINISTIC]


def deterministic_seg_config(folder):
    """The MoR-ViT toy UperNet with a deterministic pipeline and no dropout (tests/e2e/test_distributed.py
    says why one process and two can then agree)."""
    path = Path(folder) / 'morvit_deterministic.py'
    path.write_text(f"""_base_ = '{MORVIT_SEG}'
train_dataloader = dict(dataset=dict(pipeline=[
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='Resize', scale=(320, 256), keep_ratio=True),
    dict(type='PackSegInputs'),
]))
model = dict(decode_head=dict(dropout_ratio=0.0), auxiliary_head=dict(dropout_ratio=0.0))
randomness = dict(seed=0, deterministic=True)
""")
    return str(path)


def two_rank_options(root, work) -> list[str]:
    """The 2-rank run's options: 4 iterations of batch 1 per rank, a checkpoint after each."""
    return [*toy_cfg_options('seg', root, work, iters=REFERENCE_ITERS, batch=1), 'default_hooks.checkpoint.interval=1']


def compiled_mmcv_ext(folder) -> str | None:
    """The compiled `mmcv/_ext*.so` of the CPU mmcv 2.1.0 wheel that scripts/setup.sh installs for `--mmcv full`
    (offered in $MMRECVIT_WHEEL_DIR, which .ci/run sets, cached, or the shared one beside this checkout), checked
    against the SHA256SUMS beside the wheel and unpacked into `folder`; None when there is no such wheel."""
    import hashlib
    import sys
    import zipfile

    tag = f'cp{sys.version_info[0]}{sys.version_info[1]}'
    wheel = f'mmcv-2.1.0-{tag}-{tag}-linux_x86_64.whl'
    cache = osp.join(os.environ.get('XDG_CACHE_HOME', osp.expanduser('~/.cache')), 'mmrecvit', 'wheels')
    folders = [f for f in (os.environ.get('MMRECVIT_WHEEL_DIR'), cache, osp.join(REPO, '..', 'shared', 'wheels')) if f]
    found = [p for f in folders for p in (osp.join(f, 'cpu', wheel), osp.join(f, wheel)) if osp.isfile(p)]
    if not found:
        return None
    sums = osp.join(osp.dirname(found[0]), 'SHA256SUMS')  # its .so is about to be executed
    if osp.isfile(sums):
        listed = dict(line.split()[::-1] for line in open(sums) if line.strip())
        with open(found[0], 'rb') as f:
            assert listed.get(wheel) == hashlib.sha256(f.read()).hexdigest(), f'{found[0]} does not match {sums}'
    with zipfile.ZipFile(found[0]) as z:
        (member,) = [n for n in z.namelist() if n.startswith('mmcv/_ext.') and n.endswith('.so')]
        return z.extract(member, folder)


# ---- bad input (tests/tools, tests/mm, tests/e2e) ---------------------------------------------------------------
def bad_input_text(err: str) -> str:
    """stderr from the last `<tool>: error: <message>` line on (`mmrecvit.inputs.bad_input`): what came before is
    the Runner's or a library's own output; a checkpoint that does not match the model lists its keys on more lines."""
    import re

    starts = [m.start() for m in re.finditer(r'^\S+: error: ', err, re.M)]
    assert starts, err[-2000:]
    return err[starts[-1] :].rstrip('\n')


def bad_input_line(capsys, call: Callable[[], Any]) -> str:
    """Run a tool that must stop on bad input: status 2; returns its `bad_input_text`."""
    import pytest

    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        call()
    assert info.value.code == 2, info.value.code
    return bad_input_text(capsys.readouterr().err)


# The vendored snapshot of timm's repository (../shared/vendor/README.md): what timm's wheel does not ship (its
# scripts, its tests). Beside the clone in CI (`../shared`), or this machine's shared folder.
TIMM_SNAPSHOT = 'pytorch-image-models-aa4b5850.tar.gz'
VENDOR_PLACES = [Path(REPO).parent / 'shared' / 'vendor', Path('/work/shared/vendor')]


def vendored(name: str) -> Path | None:
    """The folder of `VENDOR_PLACES` that holds the vendored file `name`, or None (a machine without ../shared)."""
    return next((p for p in VENDOR_PLACES if (p / name).is_file()), None)


def extract_checked(vendor: Path, tarball: str, members: dict[str, str], out: Path) -> Path:
    """`members` (path in the tarball after its top folder -> name in `out`) of `vendor/tarball`, unpacked into `out`
    after the tarball's SHA-256 matched vendor/SHA256SUMS (a changed file is refused, never used)."""
    sums = dict(reversed(line.split()) for line in (vendor / 'SHA256SUMS').read_text().splitlines() if line.strip())
    digest = hashlib.sha256((vendor / tarball).read_bytes()).hexdigest()
    assert sums.get(tarball) == digest, f'{vendor / tarball}: SHA-256 {digest} is not the one in SHA256SUMS'
    with tarfile.open(vendor / tarball) as tar:
        root = tar.getnames()[0].split('/')[0]
        for path, name in members.items():
            member = tar.getmember(f'{root}/{path}')
            member.name = name
            tar.extract(member, out, filter='data')
    return out
