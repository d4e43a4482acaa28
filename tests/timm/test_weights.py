"""timm's `pretrained=True, pretrained_cfg_overlay=dict(file=...)` (and `state_dict=`) on our models: .pth and
.safetensors, timm/DeiT, our own and dense-backbone checkpoints through the strict key maps (mmrecvit/timm/weights.py),
and one clear error for a file that does not match or cannot be read."""

import logging

import pytest
import torch
from backbone_cases import BACKBONE_CASES
from safetensors.torch import save_file

from mmrecvit.models import BACKBONES
from mmrecvit.models.checkpoint import CheckpointError
from mmrecvit.timm import METHODS

pytestmark = pytest.mark.usefixtures('one_thread')
SHORT = {cls: short for short, cls in METHODS.items()}


def create(method, **kwargs):
    import timm

    case = {k: v for k, v in BACKBONE_CASES[method].items() if k != 'arch'}
    return timm.create_model(f'{SHORT[method]}_tiny_patch16_224', **{**case, **kwargs})


def save(state_dict, path):
    if str(path).endswith('.safetensors'):
        save_file({k: v.contiguous() for k, v in state_dict.items()}, str(path))
    else:
        torch.save(state_dict, path)
    return str(path)


@pytest.mark.parametrize('suffix', ['.pth', '.safetensors'])
@pytest.mark.parametrize('method', list(BACKBONE_CASES))
def test_a_classifier_checkpoint_loads_back_through_pretrained_cfg_overlay(method, suffix, tmp_path):
    model = create(method, num_classes=5)
    for p in model.parameters():  # every tensor away from its initial value, so a skipped key shows
        torch.nn.init.normal_(p, std=0.1)
    file = save(model.state_dict(), tmp_path / f'cls{suffix}')
    again = create(method, num_classes=5, pretrained=True, pretrained_cfg_overlay=dict(file=file, num_classes=5))
    own = again.state_dict()
    assert own.keys() == model.state_dict().keys()
    assert all(torch.equal(v, own[k]) for k, v in model.state_dict().items())


@pytest.mark.parametrize('suffix', ['.pth', '.safetensors'])
def test_a_timm_vit_checkpoint_makes_plainvit_timms_function(suffix, tmp_path):
    import timm

    vit = timm.create_model('vit_tiny_patch16_224', num_classes=5, img_size=64, embed_dim=32, num_heads=2, depth=4)
    file = save(vit.state_dict(), tmp_path / f'vit{suffix}')
    ours = create('PlainViT', num_classes=5, pretrained=True, pretrained_cfg_overlay=dict(file=file, num_classes=5))
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(ours.eval()(x), vit.eval()(x), rtol=1e-5, atol=1e-5)


def test_a_dense_backbone_or_other_class_count_keeps_the_models_head_and_says_so(tmp_path, caplog):
    dense = BACKBONES['MoRViT'](**BACKBONE_CASES['MoRViT'])
    file = save(dense.state_dict(), tmp_path / 'dense.pth')
    with caplog.at_level(logging.INFO, logger='mmrecvit'):
        model = create('MoRViT', num_classes=5, pretrained=True, pretrained_cfg_overlay=dict(file=file, num_classes=5))
    assert "the model keeps its own head (checkpoint's head.weight None, model's (5, 32))" in caplog.text
    assert all(torch.equal(v, model.backbone.state_dict()[k]) for k, v in dense.state_dict().items())
    other = save(create('MoRViT', num_classes=7).state_dict(), tmp_path / 'seven.pth')
    with caplog.at_level(logging.INFO, logger='mmrecvit'):
        create('MoRViT', num_classes=5, pretrained=True, pretrained_cfg_overlay=dict(file=other, num_classes=5))
    assert "checkpoint's head.weight (7, 32), model's (5, 32)" in caplog.text


def test_an_in_memory_state_dict_goes_through_the_same_map():
    model = create('ReViT', num_classes=5)
    sd = {k: v + 1 for k, v in model.state_dict().items()}
    again = create('ReViT', num_classes=5, pretrained=True, pretrained_cfg_overlay=dict(state_dict=sd, num_classes=5))
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in sd.items())


def test_a_checkpoint_that_does_not_match_is_one_error_naming_the_keys(tmp_path):
    sd = create('SRViT', num_classes=5).state_dict()
    sd['backbone.stray.weight'] = torch.zeros(1)
    del sd['backbone.blocks.0.attn.qkv.weight']
    file = save(sd, tmp_path / 'bad.pth')
    with pytest.raises(CheckpointError, match=r'bad\.pth does not match SRViT') as err:
        create('SRViT', num_classes=5, pretrained=True, pretrained_cfg_overlay=dict(file=file, num_classes=5))
    assert 'missing keys (1): blocks.0.attn.qkv.weight' in str(err.value)
    assert 'unexpected keys (1): stray.weight' in str(err.value)


def test_unreadable_or_absent_weights_are_one_clear_error(tmp_path):
    (tmp_path / 'cut.pth').write_bytes(b'not a checkpoint')
    with pytest.raises(CheckpointError, match=r"cannot read checkpoint '.*cut\.pth'"):
        create('PlainViT', pretrained=True, pretrained_cfg_overlay=dict(file=str(tmp_path / 'cut.pth')))
    with pytest.raises(FileNotFoundError, match=r"checkpoint file '.*absent\.pth' does not exist"):
        create('PlainViT', pretrained=True, pretrained_cfg_overlay=dict(file=str(tmp_path / 'absent.pth')))
    with pytest.raises(RuntimeError, match=r'no pretrained weights were published; load a checkpoint') as err:
        create('PlainViT', pretrained=True)
    message = str(err.value)  # one line: how to load them, and how to make them
    assert '\n' not in message and all(
        s in message for s in ('pretrained_cfg_overlay', 'checkpoint_path', 'configs/cls')
    )
