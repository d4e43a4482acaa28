"""Transformer building blocks with timm's parameter names.

`Block`, `Attention` and `Mlp` hold exactly the parameters of timm's `VisionTransformer` blocks
(`norm1`, `attn.qkv`, `attn.proj`, `norm2`, `mlp.fc1`, `mlp.fc2`, optional `ls1.gamma`/`ls2.gamma`),
so a timm/DeiT block's state dict loads into ours unchanged. Two things differ from timm on purpose:

* the stochastic-depth rate is an argument of `forward`, not a property of the module, because a
  recursive model applies one block at several depths with different rates (STYLE 3);
* `Attention` exposes its projection and attention halves (`project_qkv`, `project_kv`, `attend`)
  so the token-adaptive engine can run queries for a subset of tokens against cached keys/values.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from timm.layers import drop_path, trunc_normal_
from torch import Tensor, nn


def init_linear_norm(module: nn.Module) -> None:
    """timm's ViT initialisation: truncated normal (std 0.02) linears, unit LayerNorms."""
    if isinstance(module, nn.Linear):
        trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class Mlp(nn.Module):
    """Two-layer GELU MLP (timm `Mlp` without dropout): `fc2(gelu(fc1(x)))`."""

    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Attention(nn.Module):
    """Multi-head self-attention with a fused `qkv` projection (timm layout)."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def _split_heads(self, x: Tensor, parts: int) -> tuple[Tensor, ...]:
        B, N, _ = x.shape
        # (B, N, parts*D) -> (parts, B, heads, N, D/heads)
        x = x.reshape(B, N, parts, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return x.unbind(0)

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, N, D) -> q, k, v, each (B, heads, N, D/heads)."""
        return self._split_heads(self.qkv(x), 3)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values only (the last 2/3 of `qkv`): for tokens that are never queried."""
        dim = self.qkv.in_features
        bias = self.qkv.bias[dim:] if self.qkv.bias is not None else None
        return self._split_heads(F.linear(x, self.qkv.weight[dim:], bias), 2)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None) -> Tensor:
        """Scaled dot-product attention of q (B, h, Nq, d) over k, v (B, h, Nk, d), then `proj`."""
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        B, _, Nq, _ = x.shape
        # (B, heads, Nq, D/heads) -> (B, Nq, D)
        return self.proj(x.transpose(1, 2).reshape(B, Nq, -1))

    def forward(self, x: Tensor) -> Tensor:
        return self.attend(*self.project_qkv(x))


class LayerScale(nn.Module):
    """Per-channel residual scale (DeiT III / CaiT); `gamma` as in timm."""

    def __init__(self, dim: int, init_values: float) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), float(init_values)))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.gamma


class Block(nn.Module):
    """Pre-norm transformer block: `x + attn(norm1(x))`, then `x + mlp(norm2(x))`.

    Args:
        dim: token width D.
        num_heads: attention heads (must divide `dim`; checked by the backbones).
        mlp_ratio: MLP hidden width / D.
        qkv_bias: bias in the fused qkv projection (timm/DeiT: True).
        init_values: LayerScale init (DeiT III); None for no LayerScale.
    """

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, qkv_bias: bool = True,
                 init_values: float | None = None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads, qkv_bias)
        self.ls1 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.ls2 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.apply(init_linear_norm)

    def forward(self, x: Tensor, drop_path_rate: float = 0.0) -> Tensor:
        x = x + drop_path(self.ls1(self.attn(self.norm1(x))), drop_path_rate, self.training)
        x = x + drop_path(self.ls2(self.mlp(self.norm2(x))), drop_path_rate, self.training)
        return x
