"""Every backbone as an image classifier's backbone (`out_type`) and the transfer of its weights."""
import pytest
import torch
from backbone_cases import BACKBONE_CASES

from mmrecvit.models import BACKBONES
from mmrecvit.models.checkpoint import CheckpointError, load_pretrained

pytestmark = pytest.mark.usefixtures('one_thread')


def build(name, **kwargs):
    torch.manual_seed(0)
    return BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs})


@pytest.mark.parametrize('out_type', ['cls_token', 'avg_featmap'])
@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_classification_output_is_the_normalised_final_state(name, out_type):
    model = build(name, out_type=out_type).train()
    (feat,) = model(torch.randn(2, 3, 64, 48))
    assert feat.shape == (2, model.embed_dim)
    feat.square().mean().backward()
    assert model.norm.weight.grad is not None
    model.eval()
    with torch.no_grad():
        (feat,) = model(x := torch.randn(1, 3, 64, 48))
        states, _ = model.get_intermediate_states(x, [model.final_index])
    tokens = states[0]  # normalised by get_intermediate_states
    expected = tokens[:, 0] if out_type == 'cls_token' else tokens[:, model.num_prefix_tokens:].mean(1)
    torch.testing.assert_close(feat, expected)
    torch.testing.assert_close(tokens.mean(-1), torch.zeros_like(tokens.mean(-1)), atol=1e-4, rtol=0)  # LayerNorm'd


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_classifier_checkpoint_loads_into_the_dense_backbone_and_back(name, tmp_path, caplog):
    """An mmpretrain ImageClassifier checkpoint (backbone.* with the final norm, head.*): the head and
    the norm a dense backbone lacks are dropped and listed, every other key must match."""
    cls = build(name, out_type='cls_token')
    head = {'head.layers.head.weight': torch.randn(10, cls.embed_dim), 'head.layers.head.bias': torch.zeros(10)}
    path = tmp_path / 'cls.pth'
    torch.save({'meta': {}, 'state_dict': {**{f'backbone.{k}': v for k, v in cls.state_dict().items()}, **head}}, path)
    dense = build(name)
    with caplog.at_level('INFO', logger='mmrecvit'):
        load_pretrained(dense, str(path))
    has_norm = 'norm.weight' in dense.state_dict()  # Edge-RecViT's dense maps end with the final norm too
    assert "['head']" in caplog.text and ('norm.weight' in caplog.text) != has_norm  # what was dropped is listed
    for k, v in dense.state_dict().items():
        assert torch.equal(v, cls.state_dict()[k]), k
    # ... and a dense checkpoint into a classifier: its final norm starts fresh (listed), the rest strict
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in dense.state_dict().items()}}, tmp_path / 'det.pth')
    again = build(name, out_type='cls_token')
    with torch.no_grad():
        again.norm.weight.fill_(2.0)
    load_pretrained(again, str(tmp_path / 'det.pth'))
    assert torch.equal(again.norm.weight, dense.norm.weight if has_norm else torch.full_like(again.norm.weight, 2.0))


def test_a_missing_backbone_key_is_still_an_error(tmp_path):
    cls = build('MoRViT', out_type='cls_token')
    sd = {f'backbone.{k}': v for k, v in cls.state_dict().items() if not k.startswith('routers.0.')}
    torch.save({'state_dict': sd}, tmp_path / 'cls.pth')
    with pytest.raises(CheckpointError, match='missing keys.*routers.0.weight'):
        load_pretrained(build('MoRViT'), str(tmp_path / 'cls.pth'))


# ---- timm -------------------------------------------------------------------------------------------------
def test_every_method_and_size_is_a_timm_model():
    import timm

    import mmrecvit.models.classifier as classifier

    names = classifier.register_timm_models()
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
    loss = LabelSmoothingCrossEntropy(0.1)(model(images), labels)
    loss = loss + sum(model.backbone.stats.aux_losses.values(), torch.zeros(()))
    loss.backward()
    optimizer.step()
    assert model.forward_features(images).shape == (2, 17, 192)
    assert model.forward_head(model.forward_features(images), pre_logits=True).shape == (2, 192)


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
