"""README "Adding a method": a small 7th method written as the README says gets the FLOP model, the compute knob,
the mm, detectron2 and timm registrations and ONNX export with no further code (issue 27, item 7).

The method and the checks run in a fresh process: a registered backbone stays registered, and the suite's other
tests enumerate the six."""

import re
import sys
from pathlib import Path

import pytest
from helpers import REPO, run

# The whole method, as a user writes it (README "Adding a method"): its blocks, the block of each layer (the base
# class's one-block-per-layer generator and FLOP model) and its timm key map.
METHOD = '''
from torch import nn

from mmrecvit.models import ViTBackbone, register_backbone
from mmrecvit.models.arguments import resolve_sizes
from mmrecvit.models.checkpoint import pick_or_average_blocks, split_timm_blocks


@register_backbone('halvesvit')
class HalvesViT(ViTBackbone):
    """Two unique blocks: block 0 runs the first half of the layers, block 1 the second half."""

    def __init__(self, arch='small', *, depth=None, **kwargs):
        super().__init__(**resolve_sizes(arch, depth, kwargs), **kwargs)  # embed_dim, num_heads: taken out of kwargs
        self.blocks = nn.ModuleList(self.make_block() for _ in range(2))
        self.layer_blocks = tuple(2 * t // self.depth for t in range(self.depth))  # the block of each layer

    def convert_timm_state_dict(self, state_dict):
        rest, blocks = split_timm_blocks(state_dict)
        n = len(blocks)
        halves = [list(range(n // 2)), list(range(n // 2, n))]
        rest.update(pick_or_average_blocks(blocks, halves, 'average', prefix='blocks'))
        return rest
'''

CHECKS = """
import sys
import torch
sys.path.insert(0, sys.argv[1])
import mmrecvit, timm
from halves import HalvesViT
from mmrecvit import deploy
from mmrecvit.mm.complexity import traced_flops

kwargs = dict(arch='tiny', embed_dim=32, num_heads=2, depth=4, img_size=64)
model = HalvesViT(**kwargs).eval()
assert model.schedule == [0, 0, 1, 1] and model.layer_depth('blocks.1.mlp.fc1.weight') == 3.5
x = torch.randn(1, 3, 64, 80)
seen = []  # the statistics travel with each forward's result
model.register_forward_hook(lambda module, args, out: seen.append(out.stats))
traced = traced_flops(model, (x,))
assert abs(traced - seen[-1].flops) <= 1e-9 * traced and traced > 0, (traced, seen[-1].flops)  # as mmengine
full = seen[-1].flops
with torch.no_grad():
    stats = model(x, compute=0.5).stats
assert len(stats.blocks) < 4 and stats.flops <= 0.5 * full  # the compute knob: fewer layers
from mmdet.registry import MODELS as DET
from mmseg.registry import MODELS as SEG
from mmpretrain.registry import MODELS as CLS
assert all(r.get('HalvesViT') is HalvesViT for r in (DET, SEG, CLS))
import mmrecvit.d2
from detectron2.modeling import BACKBONE_REGISTRY
assert BACKBONE_REGISTRY.get('HalvesViT').core is HalvesViT
assert mmrecvit.d2.D2_BACKBONES['HalvesViT'](**kwargs)(x)['layer3'].shape == (1, 32, 4, 5)
assert timm.create_model('halvesvit_tiny_patch16_224', num_classes=3)(torch.randn(1, 3, 224, 224)).shape == (1, 3)
path = deploy.export_onnx(model, torch.randn(1, 3, 64, 64), sys.argv[1] + '/halves.onnx', 16, dynamic=True)
assert deploy.parity_ok(deploy.onnx_parity(model, path, [(64, 64), (96, 128)]))
print('seventh method: ok')
"""


@pytest.mark.subprocess
def test_a_seventh_method_gets_flops_the_knob_every_registration_and_export(tmp_path):
    assert len(METHOD.strip().splitlines()) <= 60
    (tmp_path / 'halves.py').write_text(METHOD)
    res = run([sys.executable, '-c', CHECKS, str(tmp_path)])
    assert res.returncode == 0 and 'seventh method: ok' in res.stdout, res.stdout[-2000:] + res.stderr[-3000:]


def test_the_readme_shows_this_method_in_at_most_15_lines():
    readme = Path(REPO, 'README.md').read_text()
    section = readme.split('## Adding a method\n', 1)[1].split('\n## ', 1)[0].strip()
    assert len(section.splitlines()) <= 15
    snippet = re.search(r'```python\n(.*?)```', section, re.S).group(1)
    for line in snippet.splitlines():
        code = line.split('  #')[0].rstrip()
        if code and not code.endswith('...'):  # the README elides the key map's body
            assert code in METHOD, code
