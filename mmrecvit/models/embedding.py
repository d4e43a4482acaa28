"""Image -> tokens with timm's parameter names: patch embedding, CLS token, resampled position embedding (SPEC §5).

The parameters live on the backbone under timm's names (`patch_embed.proj`, `cls_token`, `pos_embed`,
STYLE 2); these functions are what every backbone does with them. Any input size works: the image is
padded (bottom/right, zeros) to a multiple of the patch size (timm's `PatchEmbed` with `dynamic_img_pad`), and
`pos_embed`, stored for the pretraining grid, is resampled bicubically (timm's `resample_abs_pos_embed`) to the
input's grid.
"""

from __future__ import annotations

import torch
from timm.layers import PatchEmbed, resample_abs_pos_embed, trunc_normal_
from torch import Tensor, nn


def patch_embed(in_channels: int, embed_dim: int, patch_size: int, grid: tuple[int, int]) -> PatchEmbed:
    """timm's `PatchEmbed` (`patch_embed.proj`) for any input size: `dynamic_img_pad` pads the image at the
    bottom/right to a multiple of the patch size, as timm's ViT with `dynamic_img_pad=True`."""
    img_size = (grid[0] * patch_size, grid[1] * patch_size)
    return PatchEmbed(img_size, patch_size, in_channels, embed_dim, strict_img_size=False, dynamic_img_pad=True)


def init_tokens(embed_dim: int, num_positions: int, with_cls_token: bool) -> tuple[nn.Parameter | None, nn.Parameter]:
    """(cls_token (1, 1, D) or None, pos_embed (1, num_positions, D)) initialised as timm's ViT (positions
    drawn first: the random stream, hence a seeded model, is the same as before this module existed)."""
    cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if with_cls_token else None
    pos_embed = nn.Parameter(torch.zeros(1, num_positions, embed_dim))
    trunc_normal_(pos_embed, std=0.02)
    if cls_token is not None:
        nn.init.normal_(cls_token, std=1e-6)
    return cls_token, pos_embed


def patch_grid(x: Tensor, patch_size: int) -> tuple[int, int]:
    """The patch grid (ceil(H/p), ceil(W/p)) of an image batch, after checking its shape."""
    if x.ndim != 4:
        raise ValueError(f'expected images of shape (B, C, H, W), got shape {tuple(x.shape)}')
    H, W = x.shape[-2:]
    if H < patch_size or W < patch_size:
        raise ValueError(f'input of {H}x{W} pixels is smaller than one {patch_size}x{patch_size} patch')
    return -(-H // patch_size), -(-W // patch_size)


def embed(
    x: Tensor,
    grid: tuple[int, int],
    patch_embed: nn.Module,
    cls_token: Tensor | None,
    pos_embed: Tensor,
    pretrain_grid: tuple[int, int],
) -> Tensor:
    """(B, C, H, W) image on the patch `grid` (`patch_grid(x)`) -> (B, N, D) tokens, CLS first."""
    x = patch_embed(x)  # (B, C, H, W) -> padded -> (B, D, h, w) -> (B, h*w, D)
    num_prefix = 0 if cls_token is None else 1
    if cls_token is not None:
        x = torch.cat([cls_token.expand(x.shape[0], -1, -1), x], dim=1)
    if torch.compiler.is_compiling() or grid != pretrain_grid:  # a symbolic grid: never compared (specialised)
        pos_embed = resample_abs_pos_embed(
            pos_embed, new_size=list(grid), old_size=list(pretrain_grid), num_prefix_tokens=num_prefix
        )
    return x + pos_embed


def to_maps(states: list[Tensor], grid: tuple[int, int], num_prefix: int) -> tuple[Tensor, ...]:
    """Drop prefix tokens: (B, N, D) -> (B, D, h, w), contiguous in NCHW order.

    The transposed view is channels-last in memory, and convolutions keep that layout, so the neck's and
    FPN's maps would be too. mmcv's RoIAlign (CPU and CUDA) indexes its input as contiguous NCHW and
    silently reads a channels-last map as scrambled features: the RoI heads then see noise
    (tests/mm/test_mmcv_ops.py shows it). One copy per map here prevents that.
    """
    maps = []
    for s in states:
        s = s[:, num_prefix:]
        maps.append(s.transpose(1, 2).reshape(s.shape[0], s.shape[2], *grid).contiguous())
    return tuple(maps)
