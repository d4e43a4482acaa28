"""Transformer building blocks with timm's parameter names.

`Block` and `Attention` hold exactly the parameters of timm's `VisionTransformer` blocks (`norm1`, `attn.qkv`,
`attn.proj`, `norm2`, `mlp.fc1`, `mlp.fc2`, optional `ls1.gamma`/`ls2.gamma`), with timm's own `Mlp` and
`LayerScale`, so a timm/DeiT block's state dict loads into ours unchanged. What differs from timm, on purpose:

* the stochastic-depth rate is an argument of `forward`, not a property of the module, because a
  recursive model applies one block at several depths with different rates (STYLE 3);
* `Block` takes an `mlp_layer` (as timm and DINOv2 do): reViT's block is a `Block` whose MLP is a
  bank of experts merged per step, whose weights `forward` passes through (`**mlp_kwargs`);
* `Block.forward(x, *, drop_path_rate, layout, attn_mask)` takes everything after x by keyword (timm's second
  positional is `attn_mask`); `Attention` is timm's `Attention` whose other layouts (windows, the global grid of
  relative positions, the rows (T, D) of a token subset: the token-adaptive engine runs this same block on the
  active tokens only) go through the one dispatch `attention.attend`; `project_kv` gives the keys/values of a
  key/value cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import Attention as TimmAttention
from timm.layers import LayerScale, Mlp, trunc_normal_
from timm.layers import drop_path as timm_drop_path
from torch import Tensor, nn

from .attention import attend
from .flops import BlockWork
from .token_adaptive import TokenRows, drop_rows


def init_linear_norm(module: nn.Module) -> None:
    """timm's ViT initialisation: truncated normal (std 0.02) linears, unit LayerNorms."""
    if isinstance(module, nn.Linear):
        trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class Attention(TimmAttention):
    """timm's multi-head self-attention (`timm.layers.Attention`: a fused `qkv`, `proj`, its dense forward) with
    ViTDet's relative position tables and the other attention layouts (`attention.attend`).

    rel_pos_size: (Sh, Sw) for ViTDet's decomposed relative position biases (`rel_pos.py`): tables
    `rel_pos_h` (2*Sh - 1, head_dim) and `rel_pos_w` (2*Sw - 1, head_dim), zero-initialised, shared by
    every application of the block and resized to each one's window or global grid; the layout
    (`windows.Windows` / `windows.Global`) then says where each token is. None: no tables.
    """

    def __init__(
        self, dim: int, num_heads: int, qkv_bias: bool = True, rel_pos_size: tuple[int, int] | None = None
    ) -> None:
        super().__init__(dim, num_heads, qkv_bias=qkv_bias)
        for name, size in zip(('rel_pos_h', 'rel_pos_w'), rel_pos_size or (None, None)):
            self.register_parameter(
                name, None if size is None else nn.Parameter(torch.zeros(2 * size - 1, self.head_dim))
            )
        self.needs_layout = rel_pos_size is not None  # the tables need every token's grid position

    @property
    def rel_pos(self) -> tuple[Tensor, Tensor] | None:
        """The (rel_pos_h, rel_pos_w) tables, or None without relative position biases."""
        return None if self.rel_pos_h is None else (self.rel_pos_h, self.rel_pos_w)

    def forward(self, x: Tensor, attn_mask: Tensor | None = None, *, layout: Any = None) -> Tensor:
        """(B, N, D) -> (B, N, D): timm's dense attention (`attn_mask` (B, 1, N, N) bool, True where a query may
        attend to a key); with a `layout` (windows, the global grid of the relative positions, the (T, D) rows of a
        token subset: `attention.attend`), that layout's."""
        if layout is not None:
            q, k, v = self.qkv(x).chunk(3, dim=-1)  # token-major (..., D) each; the layout says where they are
            return self.proj(attend(q, k, v, layout, self.num_heads, self.rel_pos, attn_mask))
        if self.needs_layout:
            raise ValueError(
                "this attention has relative position biases: pass the tokens' layout "
                '(layout=windows.Global(grid, num_prefix) or windows.Windows(...))'
            )
        B, N, C = x.shape
        # (B, N, 3D) -> (3, B, heads, N, D/heads)
        q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))  # (B, heads, N, D/heads) -> (B, N, D)

    def project_kv(self, x: Tensor) -> Tensor:
        """(..., D) -> (..., 2D): keys then values only (the last 2/3 of `qkv`), for tokens that are
        attended over but not queried (a key/value cache)."""
        dim = self.qkv.in_features
        bias = self.qkv.bias[dim:] if self.qkv.bias is not None else None
        return F.linear(x, self.qkv.weight[dim:], bias)


def drop_path(delta: Tensor, rate: float, block: nn.Module, layout: Any) -> Tensor:
    """timm's stochastic depth of a residual branch in `block`'s mode, per image (per image of the rows of a token
    subset)."""
    if isinstance(layout, TokenRows):
        return drop_rows(delta, rate, block.training, layout)
    return timm_drop_path(delta, rate, block.training)


class Block(nn.Module):
    """Pre-norm transformer block: `x + attn(norm1(x))`, then `x + mlp(norm2(x))`.

    Args:
        dim: token width D.
        num_heads: attention heads (must divide `dim`; checked by the backbones).
        mlp_ratio: MLP hidden width / D.
        qkv_bias: bias in the fused qkv projection (timm/DeiT: True).
        init_values: LayerScale init (DeiT III); None for no LayerScale.
        mlp_layer: `mlp_layer(dim, hidden_dim)` builds the MLP (default timm's `Mlp`).
        rel_pos_size: relative position tables of the attention (see `Attention`); None for none.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        init_values: float | None = None,
        mlp_layer: Callable[[int, int], nn.Module] = Mlp,
        rel_pos_size: tuple[int, int] | None = None,
    ) -> None:
        super().__init__()
        self.dim, self.mlp_hidden = dim, int(dim * mlp_ratio)
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads, qkv_bias, rel_pos_size)
        self.ls1 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = mlp_layer(dim, self.mlp_hidden)
        self.ls2 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.apply(init_linear_norm)  # modules that are not nn.Linear (expert banks) initialise themselves

    def forward(
        self,
        x: Tensor,
        *,
        drop_path_rate: float = 0.0,
        layout: Any = None,
        attn_mask: Tensor | None = None,
        **mlp_kwargs: Any,
    ) -> Tensor:
        """x: tokens (B, N, D), or the (T, D) rows of a token subset with a `token_adaptive.TokenRows` layout
        (stochastic depth then per image of the rows). `layout` and `attn_mask`: see `Attention.forward`.
        `drop_path_rate`: the stochastic depth of this application (0 in eval). `mlp_kwargs` go to the MLP
        (reViT: the merged expert weights)."""
        if drop_path_rate:
            x = x + drop_path(
                self.ls1(self.attn(self.norm1(x), attn_mask, layout=layout)), drop_path_rate, self, layout
            )
            return x + drop_path(self.ls2(self.mlp(self.norm2(x), **mlp_kwargs)), drop_path_rate, self, layout)
        x = x + self.ls1(self.attn(self.norm1(x), attn_mask, layout=layout))
        return x + self.ls2(self.mlp(self.norm2(x), **mlp_kwargs))

    def project_kv(self, x: Tensor) -> Tensor:
        """(..., D) states -> (..., 2D) keys then values under this block (a key/value cache entry)."""
        return self.attn.project_kv(self.norm1(x))

    def work(
        self,
        queries: float,
        keys: float,
        new_kv: float = 0.0,
        attn_pairs: float | None = None,
        rel_pos: tuple[float, float] = (0.0, 0.0),
    ) -> BlockWork:
        """The `BlockWork` of one application of this block on that many tokens (per image); `rel_pos`: the
        layout's (queries, axis keys) of relative position terms (`rel_pos_work()`), counted if it has tables."""
        rel_queries, rel_keys = rel_pos if self.attn.rel_pos is not None else (0.0, 0.0)
        return BlockWork(self.dim, self.mlp_hidden, queries, keys, new_kv, attn_pairs, rel_queries, rel_keys)
