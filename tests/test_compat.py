"""The compatibility fixes of mmrecvit.compat (issue 2 §1)."""
import io
import pickle

import pytest
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.model import BaseModel
from mmengine.runner import CheckpointLoader, Runner
from torch import nn

import mmrecvit  # noqa: F401  (applies the fixes)


class _Tiny(BaseModel):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, x, y=None, mode='loss'):
        return dict(loss=(self.fc(x) - y).pow(2).mean())


class _Data(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return dict(x=torch.randn(2, generator=g), y=torch.randn(1, generator=g))


def _runner(work_dir, max_iters, **kw):
    return Runner(model=_Tiny(), work_dir=str(work_dir), experiment_name=f'exp{max_iters}{len(kw)}',
                  train_dataloader=dict(dataset=_Data(), batch_size=2, collate_fn=dict(type='default_collate'),
                                        sampler=dict(type='DefaultSampler', shuffle=True)),
                  train_cfg=dict(by_epoch=False, max_iters=max_iters),
                  optim_wrapper=dict(optimizer=dict(type='AdamW', lr=1e-2)),
                  default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=2, by_epoch=False)),
                  randomness=dict(seed=0), **kw)


def test_runner_checkpoints_load_weights_only_and_resume(tmp_path):
    runner = _runner(tmp_path, 4)
    runner.train()
    path = tmp_path / 'iter_4.pth'
    # torch >= 2.6 defaults to weights_only=True: this raised UnpicklingError before the fix.
    ckpt = torch.load(path, map_location='cpu')
    assert isinstance(ckpt['message_hub']['log_scalars']['train/loss'], HistoryBuffer)
    assert CheckpointLoader.load_checkpoint(str(path), map_location='cpu')['meta']['iter'] == 4
    resumed = _runner(tmp_path, 6, resume=True, load_from=str(tmp_path / 'iter_2.pth'))
    resumed.train()
    assert resumed.iter == 6


class _Escape:
    """A pickle that tries to reach arbitrary objects through the allow-listed getattr."""

    def __reduce__(self):
        return getattr, (HistoryBuffer, '__init__')


def test_getattr_is_limited_to_history_buffer_statistics():
    buf = io.BytesIO()
    torch.save({'x': _Escape()}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="refusing getattr"):
        torch.load(buf)
