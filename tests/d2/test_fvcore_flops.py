"""What detectron2's `tools/analyze_model.py --tasks flop` counts for our backbones, against our FLOP model
(docs/detectron2.md, "FLOPs"). Its counter, `detectron2.utils.analysis.FlopCountAnalysis` (fvcore's), traced
on every toy config equals, for the backbone, our count of the same forward converted: 1 multiply-add = 1 flop
(ours: 2), `scaled_dot_product_attention` not counted (no fvcore handle: q @ k^T and attn @ v left out) and
layer norms counted (ours: matrix products only)."""

from pathlib import Path

import pytest
import torch
from detectron2.config import LazyConfig, instantiate
from detectron2.utils.analysis import FlopCountAnalysis
from helpers import REPO

from mmrecvit.models.flops import BlockWork

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures('one_thread')]
TOYS = sorted(Path(REPO, 'configs/d2/toy').glob('*.py'))


def attention_macs(work) -> float:
    """Multiply-adds of q @ k^T and attn @ v in our count (`BlockWork.macs`)."""
    return sum(
        2 * (w.queries * w.keys if w.attn_pairs is None else w.attn_pairs) * w.dim
        for w in work
        if isinstance(w, BlockWork)
    )


@pytest.mark.parametrize('config', TOYS, ids=[c.stem for c in TOYS])
def test_analyze_models_backbone_flops_are_our_macs_without_attention_plus_norms(config):
    size = 128
    cfg = LazyConfig.load(str(config))
    cfg.model.backbone.square_pad = size
    model = instantiate(cfg.model).eval()
    inputs = [
        {'image': torch.randint(0, 255, (3, size, size), dtype=torch.uint8).float(), 'height': size, 'width': size}
    ]
    seen = []  # the traced forward's own record (token-adaptive backbones: the tokens it ran on)
    model.backbone.net.net.register_forward_hook(lambda module, args, out: seen.append(out.stats))
    flops = FlopCountAnalysis(model, inputs).unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    name = 'model.backbone.net.net'  # detectron2's TracingAdapter wraps the model as `model`
    theirs = flops.by_module_and_operator()[name]
    ours = seen[-1]
    assert tuple(map(int, ours.grid)) == (size // 16, size // 16)
    assert set(theirs) <= {'conv', 'linear', 'matmul', 'layer_norm'}, theirs
    assert flops.unsupported_ops(name)['aten::scaled_dot_product_attention'] == len(ours.blocks)
    products = sum(v for k, v in theirs.items() if k != 'layer_norm')
    assert products == pytest.approx(ours.flops / 2 - attention_macs(ours.work), rel=1e-9)
    assert theirs['layer_norm'] > 0  # fvcore: 5 per normalised element (affine); ours: none
