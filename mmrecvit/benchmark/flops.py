"""Analytic FLOPs per image: 2 x multiply-accumulates of the matmuls and convolutions.

Counts come from the statistics of a forward (`backbone.stats.block_flops(embed_dim)` plus the
patch embedding), so token-adaptive models are charged only for the tokens each step really
processed. A backbone that does work outside its block applications (step transforms, routers,
rankers) may define `analytic_flops() -> float` (per image, for its last forward), which then
wins. timm ViTs get the same count for a dense ViT of their size, so the numbers compare.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from torch import nn


def conv_flops(conv: nn.Conv2d, out_hw: Sequence[int]) -> float:
    """FLOPs (2 x MACs, bias not counted) of a 2-d convolution producing an `out_hw` map, per image."""
    kh, kw = conv.kernel_size
    return 2.0 * (conv.in_channels // conv.groups) * kh * kw * conv.out_channels * out_hw[0] * out_hw[1]


def conv_out_hw(conv: nn.Conv2d, hw: Sequence[int]) -> tuple[int, int]:
    """Output size of `conv` for an input of `hw` pixels (PyTorch's formula)."""
    out = []
    for i in range(2):
        pad = conv.padding[i] if isinstance(conv.padding, tuple) else 0
        size = (hw[i] + 2 * pad - conv.dilation[i] * (conv.kernel_size[i] - 1) - 1) // conv.stride[i] + 1
        out.append(size)
    return out[0], out[1]


def backbone_flops(module: nn.Module) -> float | None:
    """Analytic FLOPs per image of the last forward of one of our backbones (None if unknown).

    `module.analytic_flops()` if the backbone defines it; else the block applications recorded in
    `module.stats` plus the patch embedding on `stats.grid`.
    """
    custom = getattr(module, 'analytic_flops', None)
    if callable(custom):
        return float(custom())
    stats, dim = getattr(module, 'stats', None), getattr(module, 'embed_dim', None)
    if stats is None or dim is None or not hasattr(stats, 'block_flops'):
        return None
    flops = float(stats.block_flops(dim))
    proj = getattr(getattr(module, 'patch_embed', None), 'proj', None)
    if isinstance(proj, nn.Conv2d):
        flops += conv_flops(proj, stats.grid)
    return flops


def dense_vit_flops(dim: int, depth: int, tokens: int, mlp_hidden: int, patch_conv: nn.Conv2d | None = None,
                    grid: Sequence[int] = (0, 0)) -> float:
    """The same analytic count for a dense ViT: `depth` blocks over all `tokens`, plus the patch conv."""
    from mmrecvit.models.stats import ForwardStats, StepWork

    stats = ForwardStats(steps=[StepWork(queries=tokens, keys=tokens, mlp_hidden=mlp_hidden)] * depth)
    flops = stats.block_flops(dim)
    if patch_conv is not None:
        flops += conv_flops(patch_conv, grid)
    return flops


def timm_vit_flops(model: nn.Module, hw: Sequence[int]) -> float | None:
    """Analytic FLOPs per image of a timm VisionTransformer-like model on `hw` input (None if not one)."""
    blocks = getattr(model, 'blocks', None)
    proj = getattr(getattr(model, 'patch_embed', None), 'proj', None)
    if not blocks or not isinstance(proj, nn.Conv2d) or not hasattr(model, 'embed_dim'):
        return None
    fc1 = getattr(getattr(blocks[0], 'mlp', None), 'fc1', None)
    if not isinstance(fc1, nn.Linear):
        return None
    grid = conv_out_hw(proj, hw)
    if getattr(model.patch_embed, 'dynamic_img_pad', False):
        p = proj.stride
        grid = (math.ceil(hw[0] / p[0]), math.ceil(hw[1] / p[1]))
    tokens = grid[0] * grid[1] + int(getattr(model, 'num_prefix_tokens', 0))
    return dense_vit_flops(model.embed_dim, len(blocks), tokens, fc1.out_features, proj, grid)
