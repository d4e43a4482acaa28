"""Broken checkpoints at every entry point (issue 19): one error that names the file and what is wrong.

Faults: a truncated file, zero bytes, a text file, a JPEG, a checkpoint of another model, NaN and inf
weights, and a pickle carrying an arbitrary object (whose code must not run). Entry points: a backbone's
`init_cfg=dict(type='Pretrained')`, `tools/train.py` with `load_from` and with `--resume FILE`,
`tools/test.py`, both converters (tools/model_converters/), and the inferencers of tools/demo.py.

Every read goes through `mmrecvit.models.checkpoint_files.load_checkpoint_file` (weights only): our tools
and backbones call it, and `mmrecvit.mm.compat` (fix 3) makes it mmengine's loader of local files, which
`load_from`, `--resume`, `tools/test.py` and the inferencers use. A checkpoint of another model is
refused by the strict loaders (init_cfg, converters) or, where mmengine loads non-strictly, by
`mmrecvit.mm.checkpoint.check_checkpoint_matches_model`.
"""

import os.path as osp
import sys

import cv2
import numpy as np
import pytest
import torch
from helpers import REPO, bad_input_text, build_model, truncated

from mmrecvit.models.checkpoint_files import CORRUPT, CheckpointError

sys.path[:0] = [osp.join(REPO, 'tools'), osp.join(REPO, 'tools', 'model_converters')]
import demo as demo_tool  # noqa: E402  (tools/demo.py)
import fold_revit  # noqa: E402
import test as test_tool  # noqa: E402  (tools/test.py)
import timm2mmrecvit  # noqa: E402
import train as train_tool  # noqa: E402  (tools/train.py)

pytestmark = pytest.mark.usefixtures('one_thread')
SEG = osp.join(REPO, 'configs/seg/upernet_morvit-ti_1xb4-150it_toy-ade20k-256x256.py')


class Payload:
    """Unpickling it would create `marker` (builtins.open): a stand-in for arbitrary code."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, 'w')


def make(fault, tmp_path):
    """The file for `fault`; for the pickle, also the file its code would create."""
    path = tmp_path / f'{fault}.pth'
    meta = {'iter': 1}
    if fault == 'truncated':
        return truncated(tmp_path, path.name)
    if fault == 'empty':
        path.write_bytes(b'')
    elif fault == 'text':
        path.write_text('model weights: see the README\n')
    elif fault == 'jpeg':
        cv2.imwrite(str(tmp_path / 'image.jpg'), np.zeros((8, 8, 3), np.uint8))
        path.write_bytes((tmp_path / 'image.jpg').read_bytes())
    elif fault == 'other-model':  # a training checkpoint, of a small CNN
        torch.save(
            {
                'meta': meta,
                'state_dict': {'conv1.weight': torch.zeros(8, 3, 3, 3), 'fc.weight': torch.zeros(10, 8)},
                'message_hub': {},
            },
            path,
        )
    elif fault in ('nan', 'inf'):
        w = torch.zeros(4, 4)
        w[1, 2] = float(fault)
        torch.save({'meta': meta, 'state_dict': {'backbone.pos_embed': w}}, path)
    elif fault == 'pickle-object':
        torch.save({'meta': meta, 'state_dict': {'w': torch.zeros(2)}, 'extra': Payload(str(tmp_path / 'ran'))}, path)
    return str(path)


EXPECTED = {
    'truncated': CORRUPT,
    'empty': CORRUPT,
    'text': CORRUPT,
    'jpeg': CORRUPT,
    'other-model': r'(does not match|shares no key|not a timm/DeiT ViT checkpoint|not a reViT)',
    'nan': 'has NaN/inf weights in 1 tensor',
    'inf': 'has NaN/inf weights in 1 tensor',
    'pickle-object': 'refusing checkpoint .*: it carries a pickled object outside the allowed types '
    r'\(Unsupported global: GLOBAL io.open\); nothing in it was run',
}


def run_entry(entry, path, tmp_path):
    work = ['--work-dir', str(tmp_path / 'work')]
    if entry == 'init_cfg':
        build_model(SEG, path)[1].init_weights()
    elif entry == 'load_from':
        train_tool.main([SEG, *work, '--cfg-options', f'load_from={path}'])
    elif entry == 'resume':
        train_tool.main([SEG, '--resume', path, *work])
    elif entry == 'test':
        test_tool.main([SEG, path, *work])
    elif entry == 'timm2mmrecvit':
        timm2mmrecvit.main([path, str(tmp_path / 'out.pth'), '--model', 'PlainViT(arch="tiny")'])
    elif entry == 'fold_revit':
        fold_revit.main([path, '--depth', '4', str(tmp_path / 'out.pth')])
    elif entry == 'inferencer':
        demo_tool.build_inferencer('seg', SEG, path)
    else:
        raise AssertionError(entry)


# Entry points that check their checkpoint argument before reading it (mmrecvit.inputs.checkpoint_file): files that
# do not start like a checkpoint are named for what they are.
CHECKED_ARGUMENT = {'resume', 'test', 'timm2mmrecvit', 'fold_revit'}
SNIFFED = {
    'empty': 'is an empty file, not a checkpoint',
    'text': 'is a text file, not a checkpoint',
    'jpeg': r'is an image \(JPEG\), not a checkpoint',
}
ENTRIES = ['init_cfg', 'load_from', 'resume', 'test', 'timm2mmrecvit', 'fold_revit', 'inferencer']


@pytest.mark.parametrize('entry', ENTRIES)
@pytest.mark.parametrize('fault', list(EXPECTED))
def test_every_entry_point_stops_with_one_error_naming_the_file(tmp_path, fault, entry, capsys):
    path = make(fault, tmp_path)
    capsys.readouterr()
    with pytest.raises((CheckpointError, SystemExit)) as info:
        run_entry(entry, path, tmp_path)
    if isinstance(info.value, SystemExit):  # the tools: one line `<tool>: error: ...`, status 2
        assert info.value.code == 2, info.value.code
        message = bad_input_text(capsys.readouterr().err)
    else:
        message = str(info.value)
    assert path in message, message
    expected = EXPECTED[fault]
    if entry in CHECKED_ARGUMENT and fault in SNIFFED:  # the tool's own argument check reads the first bytes
        expected = SNIFFED[fault]
    assert __import__('re').search(expected, message), message
    assert not (tmp_path / 'ran').exists()  # the pickled object was never built
    assert not (tmp_path / 'out.pth').exists()  # a converter wrote nothing


def test_mmengine_loader_is_ours_and_weights_only(tmp_path):
    from mmengine.runner.checkpoint import CheckpointLoader

    from mmrecvit.mm.compat import load_local_checkpoint

    assert CheckpointLoader._get_checkpoint_loader('/some/file.pth') is load_local_checkpoint
    path = make('pickle-object', tmp_path)
    with pytest.raises(CheckpointError, match='refusing checkpoint'):
        CheckpointLoader.load_checkpoint(path)
    assert not (tmp_path / 'ran').exists()
