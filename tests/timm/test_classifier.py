"""Every backbone as a timm model (mmrecvit/timm/): registered names, timm's training API, checkpoints
to and from the dense backbone; and only mmrecvit/timm/ registers into timm (not the networks)."""

import ast
from pathlib import Path

import pytest
import torch
from helpers import REPO

from mmrecvit.models import BACKBONES
from mmrecvit.models.checkpoint import load_pretrained
from mmrecvit.timm import register_timm_models

pytestmark = pytest.mark.usefixtures('one_thread')


def test_every_method_and_size_is_a_timm_model():
    import timm

    names = register_timm_models()
    assert len(names) == len(BACKBONES) * 4 and set(names) <= set(timm.list_models())
    for name in names:  # built on the meta device: the names resolve and construct (L/16 included)
        with torch.device('meta'):
            model = timm.create_model(name, num_classes=7)
        assert model.num_classes == 7 and model.get_classifier().out_features == 7
        assert model.pretrained_cfg['mean'] == timm.data.IMAGENET_DEFAULT_MEAN
    with pytest.raises(RuntimeError, match='no pretrained weights'):
        timm.create_model('srvit_tiny_patch16_224', pretrained=True)


@pytest.mark.parametrize('method', ['plainvit', 'srvit', 'revit', 'edgerecvit', 'morvit', 'naiverecvit'])
def test_timm_style_training_step(method):
    import timm
    from timm.loss import LabelSmoothingCrossEntropy
    from timm.optim import create_optimizer_v2

    model = timm.create_model(f'{method}_tiny_patch16_224', num_classes=5, drop_path_rate=0.1, img_size=64)
    config = timm.data.resolve_data_config(model=model)
    assert config['input_size'] == (3, 224, 224) and config['interpolation'] == 'bicubic'
    optimizer = create_optimizer_v2(model, 'adamw', lr=1e-3, weight_decay=0.05)
    decayed = {id(p) for g in optimizer.param_groups if g['weight_decay'] > 0 for p in g['params']}
    assert id(model.backbone.pos_embed) not in decayed  # no_weight_decay()
    model.set_grad_checkpointing()
    assert model.backbone.with_cp
    images, labels = torch.randn(2, 3, 64, 64), torch.tensor([1, 3])
    # model(images) with the backbone's statistics: the final tokens and the forward's aux losses
    (tokens, _), stats = model.backbone.forward_intermediates(images, 1, output_fmt='NLC', return_stats=True)
    loss = LabelSmoothingCrossEntropy(0.1)(model.forward_head(tokens), labels)
    loss = loss + sum(stats.aux_losses.values(), torch.zeros(()))
    loss.backward()
    optimizer.step()
    assert model.forward_features(images).shape == (2, 17, 192)
    assert model.forward_head(model.forward_features(images), pre_logits=True).shape == (2, 192)


def test_timms_training_path_refuses_edge_recvit_without_its_schedule_and_cce():
    """Issue 45.5: model(x) in training mode is what timm's train.py calls; for Edge-RecViT it would train at a fixed
    tau with plain cross-entropy, so it refuses, naming the recipes that have both; eval and a loop of one's own
    (forward_features + forward_head) stay open, and the other methods train as before."""
    import timm

    x = torch.randn(1, 3, 64, 64)
    model = timm.create_model('edgerecvit_tiny_patch16_224', num_classes=5, img_size=64)
    with pytest.raises(RuntimeError, match='temperature schedule and its CCE loss.*configs/cls/edgerecvit'):
        model.train()(x)
    assert model.forward_head(model.forward_features(x)).shape == (1, 5)
    assert model.eval()(x).shape == (1, 5)
    assert timm.create_model('srvit_tiny_patch16_224', num_classes=5, img_size=64).train()(x).shape == (1, 5)


def test_timm_classifier_checkpoint_loads_into_the_dense_backbone_and_back(tmp_path):
    import timm

    model = timm.create_model('morvit_tiny_patch16_224', num_classes=5, num_recursions=3, img_size=64)
    torch.save(model.state_dict(), tmp_path / 'timm.pth')
    dense = BACKBONES['MoRViT'](arch='tiny', num_recursions=3, img_size=64)
    load_pretrained(dense, str(tmp_path / 'timm.pth'))
    for k, v in dense.state_dict().items():
        assert torch.equal(v, model.backbone.state_dict()[k]), k
    torch.save(dense.state_dict(), tmp_path / 'dense.pth')
    again = timm.create_model('morvit_tiny_patch16_224', num_classes=5, num_recursions=3, img_size=64)
    load_pretrained(again.backbone, str(tmp_path / 'dense.pth'))
    own = again.backbone.state_dict()
    assert all(torch.equal(own[k], v) for k, v in dense.state_dict().items())


# ---- where the registration lives -----------------------------------------------------------------
REGISTRY_FUNCTIONS = {'register_model', 'create_model', 'list_models', 'is_model', 'model_entrypoint'}


def test_the_entrypoints_live_in_the_timm_adapter_and_timm_is_timm():
    import timm

    import mmrecvit.timm

    assert mmrecvit.timm is not timm and timm.__file__ != mmrecvit.timm.__file__  # absolute imports
    for name in register_timm_models():
        assert timm.models.model_entrypoint(name).__module__ == 'mmrecvit.timm.entrypoints', name


def test_the_networks_use_timm_layers_but_not_its_model_registry():
    """No module of mmrecvit/models imports timm itself or timm.models (where the registry functions are),
    a registry function, or timm's registry module: registering is mmrecvit/timm/'s."""
    for path in sorted(Path(REPO, 'mmrecvit', 'models').rglob('*.py')):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                bare = [a.name for a in node.names if a.name in ('timm', 'timm.models') or '_registry' in a.name]
                assert not bare, f'{path.name}: import {bare}'
            elif isinstance(node, ast.ImportFrom) and (node.module or '').split('.')[0] == 'timm':
                names = {a.name for a in node.names}
                assert '_registry' not in node.module and not names & REGISTRY_FUNCTIONS, (
                    f'{path.name}: from {node.module} import {sorted(names)}'
                )


@pytest.mark.parametrize('method', ['plainvit', 'srvit', 'revit', 'edgerecvit', 'morvit', 'naiverecvit'])
def test_compute_per_call(method):
    """`m(x, compute=f)` (the README's per-call knob) runs the backbone at f: as the attribute does, fewer FLOPs
    than the full forward; a test-time knob, refused in training."""
    import timm

    model = timm.create_model(f'{method}_tiny_patch16_224', num_classes=5, img_size=64).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        full, half = model(x), model(x, compute=0.5)
        _, at_full = model.backbone.forward_intermediates(x, 1, return_stats=True)
        _, at_half = model.backbone.forward_intermediates(x, 1, compute=0.5, return_stats=True)
        assert at_half.flops < at_full.flops
        assert torch.equal(model.forward_head(model.forward_features(x, compute=0.5)), half)
        model.backbone.compute = 0.5
        assert torch.equal(model(x), half) and not torch.equal(full, half)
    with pytest.raises(RuntimeError, match=r'compute=0\.5 is a test-time knob'):
        model.train()(x, compute=0.5)


@pytest.mark.parametrize('features_only', [False, True])
def test_a_misspelt_argument_through_create_model_is_one_line_naming_the_closest(features_only):
    """timm users meet the same one-line error as mm and detectron2 users (issue 41.2), also through timm's feature
    wrapper."""
    import timm

    with pytest.raises(TypeError) as info:
        timm.create_model('srvit_tiny_patch16_224', features_only=features_only, num_recursion=3)
    assert (
        str(info.value)
        == "SRViT got an unknown argument 'num_recursion' (closest: 'num_recursions', 'eval_recursions')"
    )


@pytest.mark.parametrize('method', ['plainvit', 'srvit', 'revit', 'edgerecvit', 'morvit', 'naiverecvit'])
def test_timms_classifier_contract(method):
    """What timm's own `test_model_default_cfgs` (tests/test_models.py) asks of a classifier: `num_features` the
    width of `forward_features`, `head_hidden_size` that of `forward_head(pre_logits=True)` and of the output after
    `reset_classifier(0)`, the default cfg's `classifier` and `first_conv` naming parameters."""
    import timm

    model = timm.create_model(f'{method}_tiny_patch16_224', num_classes=7).eval()
    assert model.num_classes == 7 and model.num_features > 0 and model.head_hidden_size > 0
    cfg, names = model.default_cfg, set(model.state_dict())
    assert {f'{cfg["classifier"]}.weight', f'{cfg["first_conv"]}.weight'} <= names
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        tokens = model.forward_features(x)
        pre = model.forward_head(tokens, pre_logits=True)
        assert tokens.shape[-1] == model.num_features and pre.shape == (2, model.head_hidden_size)
        model.reset_classifier(0)
        assert model.num_classes == 0 and model(x).shape == pre.shape
