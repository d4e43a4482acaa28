"""timm's ViT keywords on our timm models (issue 46.4; mmrecvit/timm/arguments.py): what code written for timm's
`VisionTransformer` passes is taken with timm's meaning (`in_chans`, `class_token`) or as a documented no-op
(`dynamic_img_size`, `dynamic_img_pad`, timm's default of a structural choice, `pretrained_strict`); another value of a
choice our models do not make is one error naming it; `feature_cls` other than the getter is one line saying why."""

import inspect

import pytest
import timm
import torch
from timm.models.vision_transformer import VisionTransformer

NAME = 'plainvit_tiny_patch16_224'
SMALL = dict(depth=2, embed_dim=32, num_heads=2)
# sizes: timm's defaults are ViT-B's; they go to the backbone (`arch` and its overrides) as they are
SKIP = ('self', 'embed_dim', 'depth', 'num_heads')


def create(**kwargs):
    torch.manual_seed(0)
    return timm.create_model(NAME, **{**SMALL, **kwargs}).eval()


@pytest.mark.parametrize(
    'name, default',
    [(n, p.default) for n, p in inspect.signature(VisionTransformer.__init__).parameters.items() if n not in SKIP],
)
def test_every_keyword_of_timms_vit_at_its_default_builds_the_same_model(name, default):
    x = torch.randn(1, 3, 40, 56)  # not a multiple of the patch: padded, any size (timm's dynamic_img_*)
    with torch.no_grad():
        torch.testing.assert_close(create(**{name: default})(x), create()(x), rtol=0, atol=0)


@pytest.mark.parametrize('key', ['dynamic_img_size', 'dynamic_img_pad'])
@pytest.mark.parametrize('value', [True, False])
def test_dynamic_image_sizes_are_no_ops(key, value):
    x = torch.randn(2, 3, 50, 70)
    with torch.no_grad():
        torch.testing.assert_close(create(**{key: value})(x), create()(x), rtol=0, atol=0)


def test_class_token_and_in_chans_take_timms_meaning():
    model = create(class_token=False, global_pool='avg', in_chans=4)
    assert model.backbone.with_cls_token is False and model.num_prefix_tokens == 0
    assert model.backbone.patch_embed.proj.in_channels == 4 == model.in_chans
    assert create(in_channels=4).in_chans == 4
    with pytest.raises(ValueError, match=r'in_chans=4 \(timm\) and in_channels=2 \(ours\) differ'):
        create(in_chans=4, in_channels=2)


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(attn_drop_rate=0.1), f'^{NAME}: attn_drop_rate must be 0 .*: our blocks have no dropout'),
        (dict(qk_norm=True), f"^{NAME}: qk_norm must be False \\(timm's default, what our models are\\)"),
        (dict(reg_tokens=4), f"^{NAME}: reg_tokens must be 0 \\(timm's default"),
        (dict(dynamic_img_size='yes'), "^dynamic_img_size must be True or False, got str 'yes'"),
    ],
)
def test_a_choice_our_models_do_not_make_is_one_error_naming_it(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        create(**kwargs)


def test_pretrained_strict_is_accepted_and_loads_stay_strict(tmp_path):
    from mmrecvit.models.checkpoint import CheckpointError

    sd = create().state_dict()
    torch.save(sd, tmp_path / 'ok.pth')
    overlay = dict(file=str(tmp_path / 'ok.pth'), num_classes=1000)
    model = create(pretrained=True, pretrained_strict=False, pretrained_cfg_overlay=overlay)
    assert torch.equal(model.backbone.pos_embed, sd['backbone.pos_embed'])
    sd.pop('backbone.blocks.0.attn.qkv.weight')
    torch.save(sd, tmp_path / 'bad.pth')
    with pytest.raises(CheckpointError, match=r'missing keys \(1\): blocks.0.attn.qkv.weight'):
        create(
            pretrained=True,
            pretrained_strict=False,
            pretrained_cfg_overlay=dict(overlay, file=str(tmp_path / 'bad.pth')),
        )


@pytest.mark.parametrize('feature_cls', ['hook', 'fx'])
def test_a_feature_class_that_cannot_take_our_layers_is_one_line(feature_cls):
    with pytest.raises(ValueError) as err:
        create(features_only=True, feature_cls=feature_cls)
    message = str(err.value)
    assert '\n' not in message and message.startswith(f"{NAME}: feature_cls='{feature_cls}' cannot take our models")
    assert "use feature_cls='getter'" in message
    assert len(create(features_only=True, feature_cls='getter', out_indices=(0, 1))(torch.randn(1, 3, 32, 32))) == 2
