import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))  # tests/backbone_cases.py and helpers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    """One thread and, for runs with mmengine's `randomness.deterministic=True` (which switches torch's
    global flag on), the flag put back afterwards so it does not leak into other tests."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.use_deterministic_algorithms(False)
    torch.set_num_threads(threads)


@pytest.fixture(scope='session')
def toy_root(tmp_path_factory):
    """A small copy of the toy datasets (COCO, ADE20K: 8 train / 4 val images, 128 px; classification:
    10 train / 5 val, 64 px) for end-to-end tests."""
    from mmrecvit.datasets import make_toy_data

    root = tmp_path_factory.mktemp('toy')
    make_toy_data(root, size=128, coco_train=8, coco_val=4, ade_train=8, ade_val=4, cls_train=10, cls_val=5,
                  progress=False)
    return root


def toy_cfg_options(task: str, root, work_dir, iters: int = 2, batch: int = 2) -> list[str]:
    """--cfg-options that point a toy config at `toy_root` and shorten it to `iters` iterations."""
    from mmrecvit.datasets import toy_data_cfg

    common = [f'train_cfg.max_iters={iters}', f'train_cfg.val_interval={iters}',
              f'default_hooks.checkpoint.interval={iters}', f'train_dataloader.batch_size={batch}',
              'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
              'val_dataloader.num_workers=0', 'val_dataloader.persistent_workers=False',
              'test_dataloader.num_workers=0', 'test_dataloader.persistent_workers=False',
              'default_hooks.logger.interval=1']
    paths = [f'{k}={v}' for k, v in toy_data_cfg(task, root).items()]
    return ['--work-dir', str(work_dir), '--cfg-options', *common, *paths]
