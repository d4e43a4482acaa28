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
        tokens, _ = model.forward_intermediates(x, 1, output_fmt='NLC')  # the final tokens, normalised
    expected = tokens[:, 0] if out_type == 'cls_token' else tokens[:, model.num_prefix_tokens :].mean(1)
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
