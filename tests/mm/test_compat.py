"""The compatibility fixes of mmrecvit.mm.compat (issue 2 §1)."""

import io
import pickle

import pytest
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.model import BaseModel
from mmengine.runner import CheckpointLoader, Runner
from torch import nn

import mmrecvit.mm  # noqa: F401  (applies the fixes)


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
    return Runner(
        model=_Tiny(),
        work_dir=str(work_dir),
        experiment_name=f'exp{max_iters}{len(kw)}',
        train_dataloader=dict(
            dataset=_Data(),
            batch_size=2,
            collate_fn=dict(type='default_collate'),
            sampler=dict(type='DefaultSampler', shuffle=True),
        ),
        train_cfg=dict(by_epoch=False, max_iters=max_iters),
        optim_wrapper=dict(optimizer=dict(type='AdamW', lr=1e-2)),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=2, by_epoch=False)),
        randomness=dict(seed=0),
        **kw,
    )


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
    with pytest.raises(pickle.UnpicklingError, match='refusing getattr'):
        torch.load(buf)


def test_package_configs_resolve_from_one_metafile_index_per_package(monkeypatch, tmp_path):
    """Fix 4: a `mmdet::` base is resolved as mmengine resolves it, but each metafile is parsed once per
    process, not once per lookup (mmengine's own `_get_cfg_metainfo` re-parses ~100 of them every time)."""
    import mmengine.config.utils as config_utils
    from mmengine.config import Config
    from mmengine.fileio import load
    from mmengine.utils import get_installed_path

    from mmrecvit.mm import compat

    mmdet = get_installed_path('mmdet')
    compat._metafile_index.cache_clear()
    loads = []
    monkeypatch.setattr('mmengine.fileio.load', lambda *a, **k: loads.append(a[0]) or load(*a, **k))
    assert config_utils._get_cfg_metainfo is compat.cfg_metainfo
    config = tmp_path / 'cfg.py'
    config.write_text("_base_ = 'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'\n")  # itself on _base_ files
    for _ in range(3):
        cfg = Config.fromfile(str(config))
        assert cfg.model.type == 'MaskRCNN'
        with pytest.raises(ValueError, match='is not among the'):  # a `_base_` file: mmengine then takes its path
            compat.cfg_metainfo(mmdet, '_base_/models/mask-rcnn_r50_fpn')
    assert loads and len(loads) == len(set(loads))  # every metafile parsed once
    entry = compat.cfg_metainfo(mmdet, 'mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py')
    assert entry['Config'] == 'configs/mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'
    assert compat.is_installed('mmdet') and not compat.is_installed('no_such_package_mmrecvit')


def test_each_config_text_is_formatted_by_yapf_once_per_process(monkeypatch, tmp_path):
    """Fix 9: mmengine's `pretty_text` (a Runner's log, dumped file and every checkpoint) formats each config text
    with yapf once per process, and returns what yapf makes of it; another text is formatted again."""
    import uuid

    from mmengine.config import Config
    from yapf.yapflib import yapf_api

    formats = []
    format_tree = yapf_api.FormatTree
    monkeypatch.setattr(yapf_api, 'FormatTree', lambda *a, **k: formats.append(1) or format_tree(*a, **k))
    cfg = Config(dict(model=dict(type='PlainViT', run=uuid.uuid4().hex, widths=[1, 2, 3])))
    texts = {cfg.pretty_text for _ in range(3)}
    cfg.dump(str(tmp_path / 'cfg.py'))
    assert len(formats) == 1 and texts == {(tmp_path / 'cfg.py').read_text()}
    assert Config.fromfile(str(tmp_path / 'cfg.py')).model == cfg.model  # the dumped file reads back
    cfg.model.widths = [4]
    assert cfg.pretty_text != texts.pop() and len(formats) == 2


@pytest.mark.subprocess
def test_mmdet_and_mmpretrain_models_import_beside_transformers_5():
    """Fix 5: with transformers >= 5 installed (the `[hf]` extra), `import mmdet.models` (which imports
    mmpretrain's models) fails in mmpretrain's BLIP module unless its multimodal models are switched off first."""
    import importlib.metadata
    import subprocess
    import sys

    from helpers import SUBPROCESS_ENV

    try:
        version = importlib.metadata.version('transformers')
    except importlib.metadata.PackageNotFoundError:
        pytest.skip('transformers is not installed (the [hf] extra): nothing to fix')
    if int(version.split('.')[0]) < 5:
        pytest.skip(f'transformers {version} < 5 keeps what mmpretrain imports')
    code = (
        'import mmrecvit.mm, mmdet.models, mmpretrain.models, mmpretrain.utils.dependency as d\n'
        'from mmpretrain.registry import MODELS\n'
        "print(d.WITH_MULTIMODAL, MODELS.get('ImageClassifier').__name__)"
    )
    res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=SUBPROCESS_ENV)
    assert res.returncode == 0 and res.stdout.split() == ['False', 'ImageClassifier'], res.stderr[-2000:]
    without_hook = (  # the import hook of a `.pth` in site-packages does the fix at start: take it off
        'import sys\n'
        "sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, 'mmrecvit_import_hook', False)]\n"
        'import mmpretrain.models\n'
    )
    bare = subprocess.run([sys.executable, '-c', without_hook], capture_output=True, text=True, env=SUBPROCESS_ENV)
    assert bare.returncode != 0 and 'NoneType takes no arguments' in bare.stderr  # what the fix is for
