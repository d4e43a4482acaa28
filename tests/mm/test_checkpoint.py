"""Checkpoints under bad conditions (issue 9), through real configs and the tools.

* `init_cfg=dict(type='Pretrained', ...)` (and mmseg's `pretrained=`) in a toy config built by
  mmdet's/mmseg's registries, loaded by `model.init_weights()` as the Runner does: missing,
  unexpected and wrong-shape keys are one `CheckpointError` listing them, nothing is half-loaded;
  a truncated file is a clear error; a `pos_embed` of another grid is resampled and said in the
  mmengine log.
* `tools/train.py` (`--resume`, `load_from`) and `tools/test.py` stop with one line naming the file
  for truncated, empty or foreign files, before mmengine's bare `torch.load` would fail deep inside
  `Runner.train()` (`mmrecvit/mm/checkpoint.py`).
* No backbone keeps state outside its `state_dict` (no buffers; reViT's eval cache of merged FFNs is
  derived and invalidated by a load), so a checkpoint is the whole model.
"""

import logging
import os.path as osp
import re
import sys

import pytest
import torch
from backbone_cases import BACKBONE_CASES
from helpers import REPO, bad_input_line, build_model, truncated
from mmengine.config import Config
from mmengine.logging import MMLogger

from mmrecvit.models import BACKBONES
from mmrecvit.models.checkpoint import CheckpointError

sys.path.insert(0, osp.join(REPO, 'tools'))
import test as test_tool  # noqa: E402  (tools/test.py)
import train as train_tool  # noqa: E402  (tools/train.py)

DET = osp.join(REPO, 'configs/det/mask-rcnn_edgerecvit-ti_fpn_1xb2-800it_toy-coco.py')
SEG = osp.join(REPO, 'configs/seg/upernet_morvit-ti_1xb4-150it_toy-ade20k-256x256.py')
CORRUPT = 'the file is truncated, corrupt or not a PyTorch/safetensors checkpoint'


def backbone_kwargs(cfg):
    kwargs = {k: v for k, v in cfg.model.backbone.items() if k not in ('type', '_delete_', 'init_cfg')}
    return cfg.model.backbone.type, kwargs


def backbone_state(path, **overrides):
    name, kwargs = backbone_kwargs(Config.fromfile(path))
    torch.manual_seed(1)
    return BACKBONES[name](**{**kwargs, **overrides}).state_dict()


def save(obj, tmp_path, name='ckpt.pth'):
    torch.save(obj, tmp_path / name)
    return str(tmp_path / name)


CASES = [(DET, 'init_cfg'), (SEG, 'init_cfg'), (SEG, 'pretrained')]
CASE_IDS = ['det-init_cfg', 'seg-init_cfg', 'seg-pretrained']


@pytest.mark.parametrize('config, via', CASES, ids=CASE_IDS)
def test_mismatched_keys_through_a_config_are_one_error_listing_them(tmp_path, config, via):
    sd = backbone_state(config)
    missing = sorted(sd)[-1]
    sd.pop(missing)
    sd['blocks.9.norm1.weight'] = torch.zeros(3)
    sd['blocks.0.mlp.fc1.weight'] = torch.zeros(7, 7)
    _, model = build_model(config, save({'state_dict': sd}, tmp_path), via)
    before = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    with pytest.raises(CheckpointError) as info:
        model.init_weights()
    message = str(info.value)
    for text in [
        f'missing keys (1): {missing}',
        'unexpected keys (1): blocks.9.norm1.weight',
        'wrong shapes (1): blocks.0.mlp.fc1.weight: checkpoint (7, 7) vs model (768, 192)',
    ]:
        assert text in message, message
    for k, v in model.backbone.state_dict().items():  # nothing was half-loaded
        assert torch.equal(v, before[k]), k


@pytest.mark.parametrize('config, via', CASES, ids=CASE_IDS)
def test_truncated_checkpoint_through_a_config_is_a_clear_error(tmp_path, config, via):
    path = truncated(tmp_path)
    _, model = build_model(config, path, via)
    with pytest.raises(CheckpointError, match=f"cannot read checkpoint '{path}': {CORRUPT}"):
        model.init_weights()


@pytest.mark.parametrize('config', [DET, SEG], ids=['det', 'seg'])
def test_pos_embed_of_another_grid_is_resampled_and_logged_through_a_config(tmp_path, config):
    sd = backbone_state(config, img_size=128)  # an 8x8 grid; the toy configs' backbones have 14x14
    _, model = build_model(config, save(sd, tmp_path))
    records = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        model.init_weights()
    finally:
        logger.removeHandler(handler)
    assert any('resampled pos_embed from a 8x8 to a 14x14 grid (bicubic)' in r for r in records), records
    loaded = model.backbone.state_dict()
    assert loaded['pos_embed'].shape == (1, 14 * 14 + 1, 192)
    for k, v in sd.items():
        if k != 'pos_embed':
            assert torch.equal(loaded[k], v), k


# ---- the tools: load_from / --resume / tools/test.py with a bad file ------------------------------
def bad_files(tmp_path):
    empty = tmp_path / 'empty.pth'
    empty.write_bytes(b'')
    garbage = tmp_path / 'garbage.pth'
    garbage.write_bytes(b'this is not a checkpoint')
    return {'truncated': truncated(tmp_path), 'empty': str(empty), 'garbage': str(garbage)}


@pytest.mark.parametrize('kind', ['truncated', 'empty', 'garbage'])
@pytest.mark.parametrize('how', ['resume', 'load_from', 'auto-resume', 'test'])
def test_tools_stop_with_one_line_naming_a_bad_checkpoint(tmp_path, kind, how, capsys):
    path = bad_files(tmp_path)[kind]
    work = ['--work-dir', str(tmp_path / 'work')]
    if how == 'resume':
        run = lambda: train_tool.main([DET, '--resume', path, *work])  # noqa: E731
    elif how == 'load_from':
        run = lambda: train_tool.main([DET, *work, '--cfg-options', f'load_from={path}'])  # noqa: E731
    elif how == 'auto-resume':  # mmengine's own choice of file: work_dir/last_checkpoint
        (tmp_path / 'work').mkdir()
        (tmp_path / 'work' / 'last_checkpoint').write_text(path)
        run = lambda: train_tool.main([SEG, '--resume', *work])  # noqa: E731
    else:
        run = lambda: test_tool.main([SEG, path, *work])  # noqa: E731
    message = bad_input_line(capsys, run)
    tool = 'test.py' if how == 'test' else 'train.py'
    if how in ('resume', 'test') and kind != 'truncated':  # a file argument: checked by its first bytes first
        arg, what = '--resume' if how == 'resume' else 'CHECKPOINT', 'an empty' if kind == 'empty' else 'a text'
        assert (
            message == f"{tool}: error: {arg} '{path}' is {what} file, not a checkpoint; pass a .pth/.safetensors file"
        )
    else:
        assert message.startswith(f"{tool}: error: cannot read checkpoint '{path}': {CORRUPT}"), message


def test_resume_from_a_weights_only_file_is_refused_clearly(tmp_path, capsys):
    path = save(backbone_state(DET), tmp_path, 'weights.pth')
    line = bad_input_line(capsys, lambda: train_tool.main([DET, '--resume', path, '--work-dir', str(tmp_path)]))
    assert re.search('not a training checkpoint written by mmengine .* use load_from', line), line
    missing = str(tmp_path / 'missing.pth')
    line = bad_input_line(capsys, lambda: train_tool.main([DET, '--resume', missing, '--work-dir', str(tmp_path)]))
    assert line == f"train.py: error: --resume '{missing}': no such file"


def test_the_check_passes_a_good_training_checkpoint(tmp_path):
    from mmrecvit.mm.checkpoint import check_checkpoint_to_load

    path = save({'meta': {'iter': 2}, 'state_dict': backbone_state(DET), 'message_hub': {}}, tmp_path)
    cfg = Config(dict(resume=True, load_from=path, work_dir=str(tmp_path)))
    check_checkpoint_to_load(cfg)  # no error
    check_checkpoint_to_load(Config(dict(resume=True, load_from=None, work_dir=str(tmp_path))))  # nothing to resume


# ---- no state outside the state dict ---------------------------------------------------------------
@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_the_state_dict_is_the_whole_model_state(name):
    """A model that ran (eval caches filled) and then loads another's weights behaves exactly as that one."""
    torch.manual_seed(0)
    source = BACKBONES[name](**BACKBONE_CASES[name], drop_path_rate=0.1)
    persistent = [n for n, _ in source.named_buffers() if n in source.state_dict()]  # non-persistent: Edge-RecViT's tau
    assert not persistent, f'{name} has buffers in its state dict: {persistent}'
    assert set(source.state_dict()) == {n for n, _ in source.named_parameters()}
    torch.manual_seed(1)
    target = BACKBONES[name](**BACKBONE_CASES[name], drop_path_rate=0.1)
    x = torch.randn(2, 3, 48, 64)
    target.eval()
    with torch.no_grad():
        target(x)  # fills reViT's merged-FFN cache with the old weights
    target.load_state_dict(source.state_dict())
    for train in (False, True):
        outs = []
        for model in (source, target):
            model.train(train)
            torch.manual_seed(2)
            with torch.no_grad():
                outs.append(model(x))
        for a, b in zip(*outs):
            assert torch.equal(a, b), f'{name} {"train" if train else "eval"}'
