"""Where a backbone starts (issue 37.1, mmrecvit/models/start.py): a missing start checkpoint is one error naming it and
the command that makes it; a method started from a plain ViT's weights it cannot represent says so once, naming the
method, the checkpoint and the doc; a fair start (its own checkpoint, or a ViT it represents) says nothing."""

import warnings

import pytest
import torch

from mmrecvit.models import BACKBONES
from mmrecvit.models.start import UnrepresentableStartWarning, represents_plain_vit

TINY = dict(arch='tiny', depth=4, img_size=32)


def build(name, **kwargs):
    return BACKBONES[name](**{**TINY, **kwargs})


@pytest.fixture
def vit_file(tmp_path):
    """A plain ViT's weights (timm's key names: a PlainViT's state dict is one)."""
    torch.manual_seed(0)
    path = tmp_path / 'vit.pth'
    torch.save(build('PlainViT').state_dict(), path)
    return str(path)


def start(model, checkpoint, **init_cfg):
    model.init_cfg = dict(type='Pretrained', checkpoint=checkpoint, **init_cfg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        model.init_weights()
    return [w for w in caught if issubclass(w.category, UnrepresentableStartWarning)]


def test_a_missing_start_names_the_file_and_the_command_that_makes_it(tmp_path):
    path = str(tmp_path / 'revit-small_in1k.pth')
    command = 'python tools/train.py configs/cls/revit-small_4xb256_in1k.py'
    with pytest.raises(FileNotFoundError) as e:
        start(build('ReViT'), path, made_by=command)
    assert all(s in str(e.value) for s in ('ReViT', path, command, 'docs/pretraining.md'))
    with pytest.raises(FileNotFoundError, match='does not exist'):
        start(build('ReViT'), path)  # no command known: the file and the doc


@pytest.mark.parametrize(
    'name, kwargs',
    [
        ('ReViT', {}),
        ('EdgeRecViT', {}),
        ('MoRViT', {}),
        ('NaiveRecursiveViT', dict(num_blocks=2)),
        ('SRViT', dict(unit_sizes=(2, 2), router_init='fresh')),
    ],
)
def test_a_plain_vits_weights_in_a_method_that_cannot_represent_them_warn_once(vit_file, name, kwargs):
    model = build(name, **kwargs)
    assert not represents_plain_vit(model)
    (warning,) = start(model, vit_file)
    message = str(warning.message)
    assert all(s in message for s in (name, vit_file, 'docs/init_distance.md', 'docs/pretraining.md'))


@pytest.mark.parametrize(
    'name, kwargs',
    [('PlainViT', {}), ('SRViT', dict(unit_sizes=(2, 2), num_recursions=1)), ('NaiveRecursiveViT', dict(num_blocks=4))],
)
def test_a_vit_the_method_represents_is_a_fair_start(vit_file, name, kwargs):
    model = build(name, **kwargs)
    assert represents_plain_vit(model) and not start(model, vit_file)


def test_srvit_from_a_vits_function_is_said_to_be_the_dormant_control(vit_file):
    """Issue 45: SR-ViT with recursions represents the ViT only with them switched off; its paper's start is its own
    ImageNet-1k classifier, so the DeiT function start is a control and says so."""
    model = build('SRViT', unit_sizes=(2, 2), num_recursions=4)
    assert represents_plain_vit(model)
    (warning,) = start(model, vit_file)
    assert all(s in str(warning.message) for s in ('SRViT', 'recursion 1', 'srvit-s_in1k.py', 'control'))


@pytest.mark.parametrize('purpose', ['pretraining', 'distillation'])
@pytest.mark.parametrize('name, kwargs', [('EdgeRecViT', {}), ('SRViT', dict(unit_sizes=(2, 2)))])
def test_a_plain_vit_start_on_purpose_says_nothing(vit_file, name, kwargs, purpose):
    """A method's own pretraining recipe (Edge-RecViT's paper fine-tunes DeiT) and a distillation student start from a
    plain ViT on purpose (init_cfg['purpose']); a transfer from it warns, an unknown purpose is named."""
    assert not start(build(name, **kwargs), vit_file, purpose=purpose)
    assert len(start(build(name, **kwargs), vit_file, purpose='transfer')) == 1
    with pytest.raises(ValueError, match="init_cfg\\['purpose'\\]"):
        start(build(name, **kwargs), vit_file, purpose='finetune')


def test_the_methods_own_checkpoint_is_a_fair_start(tmp_path):
    torch.manual_seed(0)
    own = build('ReViT')
    path = tmp_path / 'revit.pth'
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in own.state_dict().items()}}, path)  # an mmengine one
    model = build('ReViT')
    assert not start(model, str(path))
    for k, v in own.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
