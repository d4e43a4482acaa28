"""Every load path applies the load rules (issue 46.1; mmrecvit/models/load_rules.py). Nothing trains: the toy
detector and segmentor (PlainViT-Ti, `img_size` 224) are saved, then loaded into the same configs at `img_size` 512
through `init_cfg` (the reference), a whole-model `load_from` (tools/train.py), tools/test.py, the mmdet and mmseg
inferencers (`weights=`), detectron2's checkpointer, timm's `checkpoint_path=` and `load_state_dict`: each ends with
the position embedding `init_cfg` gives (resampled from 14x14 to 32x32, said in the log), never the initial one.
"""

import importlib
import logging
import os.path as osp
import sys

import pytest
import torch
from helpers import REPO, bad_input_line, cached_config
from mmengine.runner import Runner

from mmrecvit.models import BACKBONES
from mmrecvit.models.checkpoint import load_state_dict_into

sys.path.insert(0, osp.join(REPO, 'tools'))
import test as test_tool  # noqa: E402  (tools/test.py)
import train as train_tool  # noqa: E402  (tools/train.py)

pytestmark = pytest.mark.usefixtures('one_thread')
DET = osp.join(REPO, 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py')
SEG = osp.join(REPO, 'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py')
BACKBONE = dict(arch='tiny', depth=6)  # the toy configs' PlainViT
SAID = 'resampled pos_embed from a 14x14 to a 32x32 grid (bicubic)'


class said:
    """The lines the core logs ('mmrecvit', which mmengine's logger shows) while open."""

    def __enter__(self):
        self.lines = []
        self.handler = logging.Handler()
        self.handler.emit = lambda record: self.lines.append(record.getMessage())
        logging.getLogger('mmrecvit').addHandler(self.handler)
        return self.lines

    def __exit__(self, *exc):
        logging.getLogger('mmrecvit').removeHandler(self.handler)


@pytest.fixture(scope='module')
def saved(tmp_path_factory):
    """{task: whole-model checkpoint of the toy model at img_size 224}, and the resampled embedding `init_cfg` makes
    of each (the reference)."""
    folder, files, reference = tmp_path_factory.mktemp('saved'), {}, {}
    for task, config in (('det', DET), ('seg', SEG)):
        torch.manual_seed(0)
        model = build(cached_config(config))
        files[task] = str(folder / f'{task}_224.pth')
        torch.save({'state_dict': model.state_dict(), 'meta': {}}, files[task])
        cfg = cached_config(config)
        cfg.model.backbone.update(
            img_size=512, init_cfg=dict(type='Pretrained', checkpoint=files[task], prefix='backbone.')
        )
        net = BACKBONES['PlainViT'](**{k: v for k, v in cfg.model.backbone.items() if k != 'type'})
        initial = net.pos_embed.detach().clone()
        with said() as lines:
            net.init_weights()
        assert any(SAID in line for line in lines), lines
        assert net.pos_embed.shape == (1, 32 * 32 + 1, 192) and not torch.equal(net.pos_embed[:, :1], initial[:, :1])
        reference[task] = net.pos_embed.detach().clone()
    return files, reference


def build(cfg):
    from mmengine.registry import init_default_scope

    init_default_scope(cfg.default_scope)
    return importlib.import_module(f'{cfg.default_scope}.registry').MODELS.build(cfg.model)


def check(pos_embed, reference, lines):
    assert any(SAID in line for line in lines), lines
    torch.testing.assert_close(pos_embed.detach(), reference, rtol=0, atol=0)


def runner_model(monkeypatch, what):
    """Runner.train/test reduced to their first step, `load_or_resume`: the tool's model as loaded."""
    monkeypatch.setattr(Runner, what, lambda self: (self.load_or_resume(), self.model)[1])


def test_load_from_of_tools_train(saved, tmp_path, monkeypatch):
    files, reference = saved
    runner_model(monkeypatch, 'train')
    options = [f'load_from={files["det"]}', 'model.backbone.img_size=512']
    with said() as lines:
        runner = train_tool.main([DET, '--work-dir', str(tmp_path), '--cfg-options', *options])
    check(runner.model.backbone.pos_embed, reference['det'], lines)


def test_tools_test(saved, tmp_path, monkeypatch):
    files, reference = saved
    runner_model(monkeypatch, 'test')
    with said() as lines:
        model = test_tool.main(
            [SEG, files['seg'], '--work-dir', str(tmp_path), '--cfg-options', 'model.backbone.img_size=512']
        )
    check(model.backbone.pos_embed, reference['seg'], lines)


def test_the_inferencers(saved):
    from mmdet.apis import DetInferencer
    from mmseg.apis import MMSegInferencer

    files, reference = saved
    for task, config, make in (('det', DET, DetInferencer), ('seg', SEG, MMSegInferencer)):
        cfg = cached_config(config)
        cfg.model.backbone.img_size = 512
        with said() as lines:
            inferencer = make(model=cfg, weights=files[task], device='cpu')
        check(inferencer.model.backbone.pos_embed, reference[task], lines)


def test_detectron2s_checkpointer(saved, tmp_path):
    pytest.importorskip('detectron2')
    from detectron2.checkpoint import DetectionCheckpointer

    import mmrecvit.d2 as d2

    files, reference = saved
    models = {size: torch.nn.ModuleDict({'backbone': d2.PlainViT(img_size=size, **BACKBONE)}) for size in (224, 512)}
    load_state_dict_into(models[224]['backbone'].net, torch.load(files['det'])['state_dict'], 'det')
    DetectionCheckpointer(models[224], save_dir=str(tmp_path)).save('model_224')
    with said() as lines:
        DetectionCheckpointer(models[512]).load(str(tmp_path / 'model_224.pth'))
    check(models[512]['backbone'].net.pos_embed, reference['det'], lines)


@pytest.mark.parametrize('how', ['checkpoint_path', 'load_state_dict'])
def test_timm(saved, tmp_path, how):
    import timm

    files, reference = saved
    small = timm.create_model('plainvit_tiny_patch16_224', depth=6, num_classes=3)
    load_state_dict_into(small.backbone, torch.load(files['det'])['state_dict'], 'det')
    torch.save(small.state_dict(), tmp_path / 'classifier_224.pth')
    with said() as lines:
        if how == 'checkpoint_path':
            model = timm.create_model(
                'plainvit_tiny_patch16_224',
                depth=6,
                num_classes=3,
                img_size=512,
                checkpoint_path=str(tmp_path / 'classifier_224.pth'),
            )
        else:
            model = timm.create_model('plainvit_tiny_patch16_224', depth=6, num_classes=3, img_size=512)
            model.load_state_dict(small.state_dict())
    check(model.backbone.pos_embed, reference['det'], lines)


# ---- 3-channel weights into 1, 4 and 12 channels (issue 46.2) --------------------------------------------------------
@pytest.fixture(scope='module')
def rgb(tmp_path_factory):
    """A 3-channel backbone's checkpoint (the toy PlainViT's size) and its patch embedding weight."""
    torch.manual_seed(0)
    net = BACKBONES['PlainViT'](**BACKBONE)
    path = tmp_path_factory.mktemp('rgb') / 'rgb.pth'
    torch.save(net.state_dict(), path)
    return str(path), net.patch_embed.proj.weight.detach().clone()


def loaded_channels(framework, channels, path, tmp_path):
    """The patch embedding weight of a `channels`-channel model that loaded the 3-channel `path` through
    `framework`'s own ways."""
    if framework == 'mm':  # a config's init_cfg, built by mmdet's registry; a whole model through mmengine's loader
        from mmdet.registry import MODELS
        from mmengine.runner import load_checkpoint

        cfg = dict(type='PlainViT', in_channels=channels, **BACKBONE)
        net = MODELS.build(dict(cfg, init_cfg=dict(type='Pretrained', checkpoint=path)))
        net.init_weights()
        whole = torch.nn.ModuleDict({'backbone': MODELS.build(cfg)})
        torch.save({'state_dict': {f'backbone.{k}': v for k, v in torch.load(path).items()}}, tmp_path / 'whole.pth')
        load_checkpoint(whole, str(tmp_path / 'whole.pth'))
        return net.patch_embed.proj.weight, whole['backbone'].patch_embed.proj.weight
    if framework == 'd2':  # the backbone's pretrained=, and detectron2's checkpointer
        pytest.importorskip('detectron2')
        from detectron2.checkpoint import DetectionCheckpointer

        import mmrecvit.d2 as d2

        net = d2.PlainViT(in_channels=channels, pretrained=path, **BACKBONE)
        model = torch.nn.ModuleDict({'backbone': d2.PlainViT(in_channels=channels, **BACKBONE)})
        sd = {f'backbone.net.{k}': v for k, v in torch.load(path).items()}
        torch.save({'model': sd}, tmp_path / 'model.pth')
        DetectionCheckpointer(model).load(str(tmp_path / 'model.pth'))
        return net.net.patch_embed.proj.weight, model['backbone'].net.patch_embed.proj.weight
    import timm  # timm's in_chans: pretrained=True with a file, and checkpoint_path=

    kwargs = dict(depth=6, num_classes=0, in_chans=channels)
    model = timm.create_model(
        'plainvit_tiny_patch16_224', pretrained=True, pretrained_cfg_overlay=dict(file=path), **kwargs
    )
    torch.save(
        timm.create_model('plainvit_tiny_patch16_224', **{**kwargs, 'in_chans': 3}).state_dict(), tmp_path / 'c.pth'
    )
    reloaded = timm.create_model('plainvit_tiny_patch16_224', checkpoint_path=str(tmp_path / 'c.pth'), **kwargs)
    rgb_weight = torch.load(tmp_path / 'c.pth')['backbone.patch_embed.proj.weight']
    return model.backbone.patch_embed.proj.weight, (reloaded.backbone.patch_embed.proj.weight, rgb_weight)


@pytest.mark.parametrize('channels', [1, 4, 12])
@pytest.mark.parametrize('framework', ['mm', 'd2', 'timm'])
def test_three_channel_weights_are_adapted_as_timm_does(rgb, framework, channels, tmp_path):
    from timm.models import adapt_input_conv

    path, weight = rgb
    with said() as lines:
        first, second = loaded_channels(framework, channels, path, tmp_path)
    second, source = second if isinstance(second, tuple) else (second, weight)
    torch.testing.assert_close(first.detach(), adapt_input_conv(channels, weight), rtol=0, atol=0)
    torch.testing.assert_close(second.detach(), adapt_input_conv(channels, source), rtol=0, atol=0)
    assert first.shape[1] == channels
    expected = f'adapted patch_embed.proj.weight from 3 to {channels} input channels'
    assert sum(expected in line for line in lines) == 2, lines  # one line per load
    if channels == 1:  # timm's rule: a grey image sees the sum of the RGB filters
        torch.testing.assert_close(first.detach(), weight.sum(1, keepdim=True))


# ---- what no rule covers: one line naming the key, on every path ----------------------------------------------------
@pytest.mark.parametrize('path', ['init_cfg', 'load_from', 'inferencer', 'detectron2', 'timm'])
def test_a_wrong_shape_no_rule_covers_is_refused_on_every_path(saved, path, tmp_path, monkeypatch, capsys):
    from mmrecvit.models.checkpoint import CheckpointError

    files, _ = saved
    ckpt = torch.load(files['det'])
    key = 'blocks.0.mlp.fc1.weight'
    ckpt['state_dict'][f'backbone.{key}'] = torch.zeros(7, 7)
    bad = str(tmp_path / 'bad.pth')
    torch.save(ckpt, bad)
    if path == 'init_cfg':
        cfg = cached_config(DET)
        cfg.model.backbone.init_cfg = dict(type='Pretrained', checkpoint=bad, prefix='backbone.')
        load = build(cfg).init_weights
    elif path == 'load_from':  # tools/train.py: its check refuses before mmengine would load with a warning
        runner_model(monkeypatch, 'train')
        line = bad_input_line(
            capsys, lambda: train_tool.main([DET, '--work-dir', str(tmp_path), '--cfg-options', f'load_from={bad}'])
        )
        assert f'backbone.{key}: checkpoint (7, 7) vs model (768, 192)' in line, line
        return
    elif path == 'inferencer':
        from mmdet.apis import DetInferencer

        load = lambda: DetInferencer(model=cached_config(DET), weights=bad, device='cpu')  # noqa: E731
    elif path == 'detectron2':
        from detectron2.checkpoint import DetectionCheckpointer

        import mmrecvit.d2 as d2

        model = torch.nn.ModuleDict({'backbone': d2.PlainViT(**BACKBONE)})
        torch.save(
            {'model': {k.replace('backbone.', 'backbone.net.', 1): v for k, v in ckpt['state_dict'].items()}}, bad
        )
        load = lambda: DetectionCheckpointer(model).load(bad)  # noqa: E731
    else:
        import timm

        sd = timm.create_model('plainvit_tiny_patch16_224', depth=6, num_classes=3).state_dict()
        sd[f'backbone.{key}'] = torch.zeros(7, 7)
        torch.save(sd, bad)
        load = lambda: timm.create_model('plainvit_tiny_patch16_224', depth=6, num_classes=3, checkpoint_path=bad)  # noqa: E731
    with pytest.raises(CheckpointError) as err:
        load()
    assert f'{key}: checkpoint (7, 7) vs model (768, 192)' in str(err.value), err.value
