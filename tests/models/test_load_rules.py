"""The load rules inside `load_state_dict` (issue 46; mmrecvit/models/load_rules.py): a backbone's load pre-hook
resamples `pos_embed`, resizes relative position tables and adapts a 3-channel patch embedding in any
`load_state_dict` that reaches it (torch's, mmengine's), as the strict `init_cfg` path does, and refuses every other
wrong shape in one line naming the keys, where torch (non-strict) and mmengine would keep the initial tensor. The
paths of the frameworks: tests/test_load_paths.py."""

import pytest
import torch
from mmengine.runner.checkpoint import load_state_dict as mmengine_load_state_dict

from mmrecvit.models import BACKBONES
from mmrecvit.models.checkpoint import CheckpointError, load_state_dict_into

TINY = dict(arch='tiny', embed_dim=32, num_heads=2)


def build(name='PlainViT', **kwargs):
    torch.manual_seed(0)
    return BACKBONES[name](**{**TINY, 'depth': 4, **kwargs})


@pytest.mark.parametrize('name', ['PlainViT', 'SRViT'])
def test_another_grid_loads_as_init_cfg_loads_it(name):
    """pos_embed and (ViTDet's) relative position tables of a 224 model into a 512 one: every key as the strict path
    makes it, through torch's load_state_dict and inside a larger model."""
    kwargs = dict(use_rel_pos=True, **(dict(unit_sizes=(2, 2)) if name == 'SRViT' else {}))
    source = build(name, **kwargs).state_dict()
    reference = build(name, img_size=512, **kwargs)
    load_state_dict_into(reference, source)
    direct = build(name, img_size=512, **kwargs)
    direct.load_state_dict(source)
    wrapped = torch.nn.ModuleDict({'backbone': build(name, img_size=512, **kwargs)})
    mmengine_load_state_dict(wrapped, {f'backbone.{k}': v for k, v in source.items()})
    tables = [k for k in source if k.endswith('rel_pos_h')]
    assert tables and source[tables[0]].shape[0] == 2 * 14 - 1
    for model in (direct, wrapped['backbone']):
        for k, v in reference.state_dict().items():
            torch.testing.assert_close(model.state_dict()[k], v, rtol=0, atol=0, msg=k)
    assert reference.state_dict()[tables[0]].shape[0] == 2 * 32 - 1


@pytest.mark.parametrize(
    'key, value',
    [
        ('blocks.0.mlp.fc1.weight', torch.zeros(7, 7)),
        ('pos_embed', torch.zeros(1, 197, 16)),  # another width: no grid resampling makes it the model's
        ('pos_embed', torch.zeros(1, 150, 32)),  # not a square grid
        ('patch_embed.proj.weight', torch.zeros(32, 2, 16, 16)),  # 2 channels: timm's rule starts from RGB
    ],
    ids=['block', 'width', 'not-square', 'two-channels'],
)
@pytest.mark.parametrize('how', ['torch-strict', 'torch-lenient', 'mmengine'])
def test_a_wrong_shape_no_rule_covers_is_one_line_naming_it(key, value, how):
    sd = build().state_dict()
    sd[key] = value
    model = torch.nn.ModuleDict({'backbone': build()})
    before = model['backbone'].state_dict()[key].clone()
    sd = {f'backbone.{k}': v for k, v in sd.items()}
    load = {
        'torch-strict': lambda: model.load_state_dict(sd),
        'torch-lenient': lambda: model.load_state_dict(sd, strict=False),
        'mmengine': lambda: mmengine_load_state_dict(model, sd),  # would warn and keep the model's tensor
    }[how]
    with pytest.raises(CheckpointError) as err:
        load()
    message = str(err.value)
    assert '\n' not in message and message.startswith('load_state_dict (backbone.*): wrong shapes that no load rule')
    assert f'backbone.{key}: checkpoint {tuple(value.shape)} vs model {tuple(before.shape)}' in message
    assert torch.equal(model['backbone'].state_dict()[key], before)


def test_the_rules_are_said_once_per_load(caplog):
    source = build().state_dict()
    model = build(img_size=512, in_channels=1)
    with caplog.at_level('INFO', logger='mmrecvit'):
        model.load_state_dict(source)
    lines = [r.getMessage() for r in caplog.records if r.name == 'mmrecvit']
    assert lines == [
        'load_state_dict: resampled pos_embed from a 14x14 to a 32x32 grid (bicubic)',
        "load_state_dict: adapted patch_embed.proj.weight from 3 to 1 input channels (timm's adapt_input_conv: "
        'summed over RGB)',
    ]
