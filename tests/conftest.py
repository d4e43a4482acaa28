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
    """A small copy of both toy datasets (8 train / 4 val images, 128 px) for end-to-end tests."""
    from mmrecvit.datasets import make_toy_data

    root = tmp_path_factory.mktemp('toy')
    make_toy_data(root, size=128, coco_train=8, coco_val=4, ade_train=8, ade_val=4, progress=False)
    return root


def toy_cfg_options(task: str, root, work_dir, iters: int = 2, batch: int = 2) -> list[str]:
    """--cfg-options that point a toy config at `toy_root` and shorten it to `iters` iterations."""
    common = [f'train_cfg.max_iters={iters}', f'train_cfg.val_interval={iters}',
              f'default_hooks.checkpoint.interval={iters}', f'train_dataloader.batch_size={batch}',
              'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
              'val_dataloader.num_workers=0', 'val_dataloader.persistent_workers=False',
              'test_dataloader.num_workers=0', 'test_dataloader.persistent_workers=False',
              'default_hooks.logger.interval=1']
    if task == 'det':
        data_root = f'{root}/toy_coco/'
        ann = data_root + 'annotations/instances_val2017.json'
        paths = [f'train_dataloader.dataset.data_root={data_root}', f'val_dataloader.dataset.data_root={data_root}',
                 f'test_dataloader.dataset.data_root={data_root}', f'val_evaluator.ann_file={ann}',
                 f'test_evaluator.ann_file={ann}']
    else:
        data_root = f'{root}/toy_ade/ADEChallengeData2016'
        paths = [f'{split}_dataloader.dataset.data_root={data_root}' for split in ('train', 'val', 'test')]
    return ['--work-dir', str(work_dir), '--cfg-options', *common, *paths]
