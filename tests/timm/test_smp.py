"""segmentation_models_pytorch's ViT model (DPT) with `tu-<our model>` encoders (the [smp] extra): forward and
backward for every method, also with the compute knob set (eval mode: a test-time knob)."""

import pytest
import torch
from backbone_cases import BACKBONE_CASES

from mmrecvit.timm import METHODS

smp = pytest.importorskip('segmentation_models_pytorch')
pytestmark = pytest.mark.usefixtures('one_thread')
SHORT = {cls: short for short, cls in METHODS.items()}


def dpt(method, **kwargs):
    """smp.DPT on the tiny case (its `depth` is DPT's encoder depth: the model keeps the size's 12 layers)."""
    case = {k: v for k, v in BACKBONE_CASES[method].items() if k not in ('arch', 'depth')}
    torch.manual_seed(0)
    return smp.DPT(
        encoder_name=f'tu-{SHORT[method]}_tiny_patch16_224', encoder_weights=None, classes=3, **case, **kwargs
    )


@pytest.mark.parametrize('method', list(BACKBONE_CASES))
def test_dpt_runs_forward_and_backward(method):
    model = dpt(method)
    backbone = model.encoder.model.backbone
    assert model.encoder.has_prefix_tokens  # DPT reads our CLS token (timm's return_prefix_tokens)
    out = model(torch.randn(2, 3, 64, 96))  # DPT wants sides divisible by 32
    assert out.shape == (2, 3, 64, 96)
    out.square().mean().backward()
    # every backbone parameter learns but the final norm (DPT reads the intermediates, as with timm's ViTs)
    missing = [n for n, p in backbone.named_parameters() if p.grad is None and not n.startswith('norm.')]
    assert not missing


@pytest.mark.parametrize('method', list(BACKBONE_CASES))
def test_dpt_with_the_compute_knob(method):
    full, half = dpt(method).eval(), dpt(method, compute=0.5).eval()
    assert half.encoder.model.backbone.compute == 0.5
    x = torch.randn(1, 3, 64, 64)
    out = half(x)
    out.mean().backward()
    assert half.encoder.model.backbone.patch_embed.proj.weight.grad is not None
    with torch.no_grad():
        assert not torch.allclose(out, full(x))
    with pytest.raises(RuntimeError, match='compute=0.5 is a test-time knob'):
        half.train()(x)
