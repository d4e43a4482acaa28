"""timm's feature API on every method (mmrecvit/timm/classifier.py): timm's own feature-extraction checks as timm's
tests/test_models.py runs them on its ViTs (test_model_forward_features, test_model_forward_intermediates_features,
test_model_forward_intermediates: the registered models, default arguments, input size capped at 96), the
`features_only` maps equal to what the mm and detectron2 adapters return for the same layers, pruning, the compute
knob per call, and one clear error for bad input."""

import math

import pytest
import torch
from backbone_cases import BACKBONE_CASES
from timm.layers import get_channel_dim, get_spatial_dim

from mmrecvit.models import BACKBONES
from mmrecvit.models.checkpoint import load_state_dict_into
from mmrecvit.timm import METHODS

pytestmark = pytest.mark.usefixtures('one_thread')
SHORT = {cls: short for short, cls in METHODS.items()}
NAMES = [f'{SHORT[m]}_tiny_patch16_224' for m in BACKBONE_CASES]
TARGET_FFEAT_SIZE = 96  # timm's tests/test_models.py


def input_size(model):
    """timm's `_get_input_size(model, target=96)` for a model without a fixed input size."""
    return tuple(min(s, TARGET_FFEAT_SIZE) for s in model.default_cfg['input_size'])


def check_maps(outputs, channels, reductions, size, fmt='NCHW', batch=1):
    """The assertions of timm's feature tests on each output."""
    assert len(channels) == len(outputs) >= 3
    for e, r, o in zip(channels, reductions, outputs):
        assert e == o.shape[get_channel_dim(fmt)]
        assert o.shape[get_spatial_dim(fmt)[0]] <= math.ceil(size[0] / r) + 1
        assert o.shape[get_spatial_dim(fmt)[1]] <= math.ceil(size[1] / r) + 1
        assert o.shape[0] == batch and not torch.isnan(o).any()


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('feature_cls', [None, 'getter'])
def test_timms_forward_features_check(name, feature_cls):
    """timm's test_model_forward_features and test_model_forward_intermediates_features."""
    import timm

    kwargs = {} if feature_cls is None else dict(feature_cls=feature_cls)
    model = timm.create_model(name, pretrained=False, features_only=True, **kwargs).eval()
    size = input_size(model)
    outputs = model(torch.randn(1, *size))
    check_maps(outputs, model.feature_info.channels(), model.feature_info.reduction(), size[-2:])


@pytest.mark.parametrize('name', NAMES)
def test_timms_forward_intermediates_check(name):
    """timm's test_model_forward_intermediates: every layer, the final output equal to forward_features, and again
    with gradient checkpointing."""
    import timm

    model = timm.create_model(name, pretrained=False).eval()
    info = timm.models.FeatureInfo(model.feature_info, len(model.feature_info))
    size = input_size(model)
    x = torch.randn(1, *size)
    output, intermediates = model.forward_intermediates(x, output_fmt='NCHW')
    check_maps(intermediates, info.channels(), info.reduction(), size[-2:])
    assert len(intermediates) == model.backbone.depth
    assert torch.allclose(output, model.forward_features(x))
    model.set_grad_checkpointing()
    output3, _ = model.forward_intermediates(x, output_fmt='NCHW')
    assert torch.allclose(output, output3, rtol=1e-4, atol=1e-5)


def tiny(method, **kwargs):
    import timm

    case = {k: v for k, v in BACKBONE_CASES[method].items() if k != 'arch'}
    return timm.create_model(f'{SHORT[method]}_tiny_patch16_224', **{**case, **kwargs})


def layers_to_read(method):
    """Three layers, the last not the final one where the depth allows: features_only then prunes."""
    depth = BACKBONES[method](**BACKBONE_CASES[method]).depth
    return (0, (depth - 2) // 2, depth - 2)


@pytest.mark.parametrize('method', list(BACKBONE_CASES))
def test_features_only_maps_equal_the_mm_and_d2_adapters(method):
    from mmdet.registry import MODELS as MMDET
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS as MMSEG

    from mmrecvit.d2 import D2_BACKBONES

    layers = layers_to_read(method)
    torch.manual_seed(0)
    weights = tiny(method).backbone.state_dict()  # the same initialisation as the next model's, before its pruning
    torch.manual_seed(0)
    features = tiny(method, features_only=True, out_indices=layers).eval()
    assert tuple(features.feature_info.out_indices) == layers
    assert all(torch.equal(v, weights[k]) for k, v in features.model.backbone.state_dict().items())
    x = torch.randn(2, 3, 64, 80)
    with torch.no_grad():
        ours = features(x)
        for scope, registry in (('mmdet', MMDET), ('mmseg', MMSEG)):
            with DefaultScope.overwrite_default_scope(scope):  # another test may leave another scope set
                mm = registry.build(dict(type=method, **BACKBONE_CASES[method], out_indices=layers)).eval()
            load_state_dict_into(mm, weights)
            torch.testing.assert_close(list(mm(x)), ours, rtol=0, atol=0)
        d2 = D2_BACKBONES[method](**BACKBONE_CASES[method], out_indices=layers).eval()
        load_state_dict_into(d2.net, weights)
        torch.testing.assert_close(list(d2(x).values()), ours, rtol=0, atol=0)


@pytest.mark.parametrize('method', list(BACKBONE_CASES))
def test_forward_intermediates_with_timms_arguments(method):
    model = tiny(method, num_classes=5).eval()
    x = torch.randn(2, 3, 64, 80)  # 4 x 5 patches
    L, D = model.backbone.depth, model.embed_dim
    with torch.no_grad():
        final, maps = model.forward_intermediates(x, indices=2)
        assert torch.equal(final, model.forward_features(x)) and len(maps) == 2 and maps[0].shape == (2, D, 4, 5)
        nlc = model.forward_intermediates(x, indices=[L - 2, -1], output_fmt='NLC', intermediates_only=True)
        assert [torch.equal(a.transpose(1, 2).reshape(2, D, 4, 5), b) for a, b in zip(nlc, maps)] == [True, True]
        # norm: the final norm on the intermediates; the last layer's, normed, is the final output without CLS
        ((normed, prefix),) = model.forward_intermediates(
            x, indices=[-1], norm=True, output_fmt='NLC', intermediates_only=True, return_prefix_tokens=True
        )
        assert torch.equal(normed, final[:, 1:]) and torch.equal(prefix, final[:, :1])
        early = model.forward_intermediates(x, indices=[0], stop_early=True, intermediates_only=True)
        assert torch.equal(early[0], model.forward_intermediates(x, indices=[0], intermediates_only=True)[0])
        half = model.forward_intermediates(x, indices=1, compute=0.5, intermediates_only=True)
        assert not torch.equal(half[0], maps[-1])


@pytest.mark.parametrize('method', list(BACKBONE_CASES))
def test_prune_intermediate_layers_keeps_the_maps(method):
    layers = list(layers_to_read(method))
    model = tiny(method, num_classes=5).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        before, ran = model.forward_intermediates(x, indices=layers, intermediates_only=True, return_stats=True)
        assert model.prune_intermediate_layers([-1 - (model.backbone.depth - 1 - i) for i in layers]) == layers
        assert isinstance(model.get_classifier(), torch.nn.Identity)
        after, pruned = model.forward_intermediates(x, indices=layers, intermediates_only=True, return_stats=True)
    torch.testing.assert_close(after, before, rtol=0, atol=0)
    assert pruned.flops < ran.flops  # the layers after the last one read are gone (cut) or not run (stop early)


@pytest.mark.parametrize('method', list(BACKBONE_CASES))
def test_features_only_models_put_every_parameter_in_the_graph(method):
    """Issue 48.4: timm's features_only model of every method is pruned to what its layers need, so DDP with
    `find_unused_parameters=False` finds every parameter in the graph of a training step (the recursive methods
    stopped early before, keeping later blocks without a gradient)."""
    model = tiny(method, features_only=True, out_indices=layers_to_read(method)).train()
    sum(f.square().mean() for f in model(torch.randn(2, 3, 64, 80))).backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []


def test_bad_input_is_one_clear_error():
    import timm

    model = tiny('SRViT')
    x = torch.randn(1, 3, 64, 64)
    with pytest.raises(ValueError, match=r'indices entry must be .*got 6'):
        model.forward_intermediates(x, indices=[0, 6])
    with pytest.raises(ValueError, match=r'indices: last-n \(7\) is out of range \(1 to 6\)'):
        model.forward_intermediates(x, indices=7)
    with pytest.raises(ValueError, match=r"output_fmt must be one of \['NCHW', 'NLC'\], got 'NHWC'"):
        model.forward_intermediates(x, output_fmt='NHWC')
    with pytest.raises(ValueError, match=r'indices entry must be .*got 12'):
        timm.create_model('srvit_tiny_patch16_224', features_only=True, out_indices=(2, 12))
