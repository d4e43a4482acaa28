"""Checkpoint locations with a scheme (issue 46.3; mmrecvit/models/checkpoint_files.py `load_remote`): `https://`,
`open-mmlab://`, `torchvision://` and `hf-hub:` go to mmengine's or timm's loaders, which download them, through
`init_cfg` (and mmseg's `model.pretrained`) and `load_from` (tools/train.py, tools/test.py). A server on 127.0.0.1
(a thread of this process) serves the files; torch.hub's cache is a fresh folder. What cannot be fetched is one error
naming the config key; a pickled object is refused, never run, on every path (mmengine's own http loader reads with
torch.hub's `weights_only=False`: `mmrecvit.mm.compat` fix 3)."""

import functools
import http.server
import json
import os.path as osp
import sys
import threading

import pytest
import torch
from helpers import REPO, bad_input_line, build_model, cached_config
from mmengine.runner import Runner

from mmrecvit.models import checkpoint_files
from mmrecvit.models.checkpoint import CheckpointError

sys.path.insert(0, osp.join(REPO, 'tools'))
import test as test_tool  # noqa: E402  (tools/test.py)
import train as train_tool  # noqa: E402  (tools/train.py)

pytestmark = pytest.mark.usefixtures('one_thread')
DET = osp.join(REPO, 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py')
SEG = osp.join(REPO, 'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py')
KEYS = 'init_cfg.checkpoint / model.pretrained'


class Opens:
    """Unpickling it opens (creates) a file: what a weights-only reader must never do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, 'w')


@pytest.fixture
def served(tmp_path, monkeypatch):
    """(base URL of a server on 127.0.0.1 serving tmp_path/www, that folder); torch.hub's cache in tmp_path/hub."""
    www = tmp_path / 'www'
    www.mkdir()
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch'))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{server.server_address[1]}', www
    server.shutdown()
    server.server_close()


@pytest.fixture
def toy_weights(served):
    """The toy detector's whole-model checkpoint (seed 0), served as /det.pth: (URL, its state dict)."""
    base, www = served
    torch.manual_seed(0)
    sd = detector(None).state_dict()
    torch.save({'state_dict': sd, 'meta': {}}, www / 'det.pth')
    return f'{base}/det.pth', sd


def detector(checkpoint, prefix='backbone.'):
    """The toy detector, its backbone started from `checkpoint` (None: random) by `init_cfg`."""
    from mmdet.registry import MODELS
    from mmengine.registry import init_default_scope

    cfg = cached_config(DET)
    init = None if checkpoint is None else dict(type='Pretrained', checkpoint=checkpoint, prefix=prefix)
    cfg.model.backbone.init_cfg = init
    init_default_scope('mmdet')
    return MODELS.build(cfg.model)


def backbone_equals(model, sd):
    for k, v in model.backbone.state_dict().items():
        assert torch.equal(v, sd[f'backbone.{k}']), k


def test_init_cfg_and_mmsegs_pretrained_download_a_url(toy_weights, served):
    url, sd = toy_weights
    model = detector(url)
    model.init_weights()
    backbone_equals(model, sd)
    torch.save({k[len('backbone.') :]: v for k, v in sd.items() if k.startswith('backbone.')}, served[1] / 'vit.pth')
    _, segmentor = build_model(SEG, f'{served[0]}/vit.pth', via='pretrained')
    segmentor.init_weights()
    backbone_equals(segmentor, sd)


def test_open_mmlab_and_torchvision_names_go_to_mmengines_loaders(toy_weights, tmp_path, monkeypatch):
    import mmengine.runner.checkpoint as mm_checkpoint

    url, sd = toy_weights
    monkeypatch.setenv('MMENGINE_HOME', str(tmp_path / 'mmengine'))  # mmengine reads extra names from here
    (tmp_path / 'mmengine').mkdir()
    (tmp_path / 'mmengine' / 'open_mmlab.json').write_text(json.dumps({'toy_vit': url}))
    monkeypatch.setattr(mm_checkpoint, 'get_torchvision_models', lambda: {'toy_vit': url})
    for location in ('open-mmlab://toy_vit', 'torchvision://toy_vit'):
        model = detector(location)
        model.init_weights()
        backbone_equals(model, sd)


def test_hf_hub_goes_to_timms_loader(monkeypatch):
    calls = []
    weights = {'w': torch.ones(2)}
    monkeypatch.setattr(
        checkpoint_files, 'load_state_dict_from_hf', lambda repo, **kw: calls.append((repo, kw)) or weights
    )
    assert checkpoint_files.read_checkpoint('hf-hub:timm/deit_small_patch16_224.fb_in1k') == weights
    assert calls == [('timm/deit_small_patch16_224.fb_in1k', {'weights_only': True})]


def runner_model(monkeypatch, what):
    """Runner.train/test reduced to their first step, `load_or_resume`: the tool's model as loaded."""
    monkeypatch.setattr(Runner, what, lambda self: (self.load_or_resume(), self.model)[1])


def test_load_from_and_tools_test_download_a_url(toy_weights, tmp_path, monkeypatch):
    url, sd = toy_weights
    runner_model(monkeypatch, 'train')
    runner = train_tool.main([DET, '--work-dir', str(tmp_path / 'train'), '--cfg-options', f'load_from={url}'])
    backbone_equals(runner.model, sd)
    runner_model(monkeypatch, 'test')
    backbone_equals(test_tool.main([DET, url, '--work-dir', str(tmp_path / 'test')]), sd)


def test_what_cannot_be_fetched_is_one_line_naming_the_key(served, tmp_path, capsys):
    base, _ = served
    missing = f'{base}/missing.pth'
    model = detector(missing)
    with pytest.raises(CheckpointError) as err:
        model.init_weights()
    assert str(err.value).startswith(f"{KEYS}: cannot fetch checkpoint '{missing}': HTTPError"), err.value
    model = detector('open-mmlab://no_such_model')
    with pytest.raises(CheckpointError, match=f"^{KEYS}: cannot fetch checkpoint 'open-mmlab://no_such_model'"):
        model.init_weights()
    line = bad_input_line(
        capsys, lambda: train_tool.main([DET, '--work-dir', str(tmp_path), '--cfg-options', f'load_from={missing}'])
    )
    assert line.startswith(f"train.py: error: load_from: cannot fetch checkpoint '{missing}'"), line


def test_a_pickled_object_at_a_url_is_refused_not_run(served, tmp_path, monkeypatch):
    base, www = served
    marker = tmp_path / 'opened'
    torch.save({'state_dict': {'w': torch.zeros(1)}, 'payload': Opens(str(marker))}, www / 'evil.pth')
    url = f'{base}/evil.pth'
    model = detector(url)
    with pytest.raises(CheckpointError, match='refusing checkpoint .* a pickled object outside the allowed types'):
        model.init_weights()
    from mmengine.runner import load_checkpoint  # what load_from and the inferencers call: mmengine's http loader

    with pytest.raises(CheckpointError, match='refusing checkpoint'):
        load_checkpoint(model, url)
    assert not marker.exists()
