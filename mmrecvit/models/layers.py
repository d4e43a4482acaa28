"""Transformer building blocks with timm's parameter names.

`Block` and `Attention` hold exactly the parameters of timm's `VisionTransformer` blocks (`norm1`, `attn.qkv`,
`attn.proj`, `norm2`, `mlp.fc1`, `mlp.fc2`, optional `ls1.gamma`/`ls2.gamma`), with timm's own `Mlp` and
`LayerScale`, so a timm/DeiT block's state dict loads into ours unchanged. What differs from timm, on purpose:

* the stochastic-depth rate is an argument of `forward`, not a property of the module, because a
  recursive model applies one block at several depths with different rates (STYLE 3);
* `Block` takes an `mlp_layer` (as timm and DINOv2 do): reViT's block is a `Block` whose MLP is a
  bank of experts merged per step, whose weights `forward` passes through (`**mlp_kwargs`);
* `Block.forward` and `Attention.forward` also run on the rows (T, D) of a token subset
  (`rows`, a `token_adaptive.TokenRows`): the token-adaptive engine runs this same block on the
  active tokens only, with attention among them or over a key/value cache. `Attention` provides
  the pieces that engine needs (`project_qkv`, `project_kv`, `attend_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import LayerScale, Mlp, drop_path, trunc_normal_
from torch import Tensor, nn

from .flops import BlockWork
from .rel_pos import merge_heads, with_key_mask


def init_linear_norm(module: nn.Module) -> None:
    """timm's ViT initialisation: truncated normal (std 0.02) linears, unit LayerNorms."""
    if isinstance(module, nn.Linear):
        trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class Attention(nn.Module):
    """Multi-head self-attention with a fused `qkv` projection (timm layout).

    rel_pos_size: (Sh, Sw) for ViTDet's decomposed relative position biases (`rel_pos.py`): tables
    `rel_pos_h` (2*Sh - 1, head_dim) and `rel_pos_w` (2*Sw - 1, head_dim), zero-initialised, shared by
    every application of the block and resized to each one's window or global grid; the layout
    (`windows.Windows` / `windows.Global`) then says where each token is. None: no tables.
    """

    def __init__(
        self, dim: int, num_heads: int, qkv_bias: bool = True, rel_pos_size: tuple[int, int] | None = None
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        for name, size in zip(('rel_pos_h', 'rel_pos_w'), rel_pos_size or (None, None)):
            self.register_parameter(
                name, None if size is None else nn.Parameter(torch.zeros(2 * size - 1, self.head_dim))
            )

    @property
    def rel_pos(self) -> tuple[Tensor, Tensor] | None:
        """The (rel_pos_h, rel_pos_w) tables, or None without relative position biases."""
        return None if self.rel_pos_h is None else (self.rel_pos_h, self.rel_pos_w)

    def forward(self, x: Tensor, rows: Any = None, attn_mask: Tensor | None = None) -> Tensor:
        """(B, N, D) -> (B, N, D); with `rows`, another layout of the tokens: the (T, D) rows of a
        token subset (`token_adaptive.TokenRows`), windows (`windows.Windows`) or the global grid
        (`windows.Global`, needed with relative position biases).

        attn_mask: (B, 1, N, N) bool, True where a query may attend to a key.
        """
        if rows is not None:
            return rows.attend(self, x, attn_mask)
        if self.rel_pos_h is not None:
            raise ValueError(
                "this attention has relative position biases: pass the tokens' layout "
                '(rows=windows.Global(grid, num_prefix) or windows.Windows(...))'
            )
        B, N, D = x.shape
        # (B, N, 3D) -> (3, B, heads, N, D/heads)
        q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return self.proj(x.transpose(1, 2).reshape(B, N, D))  # (B, heads, N, D/heads) -> (B, N, D)

    def attend_dense(self, x: Tensor, attn_mask: Tensor | None, layout: Any) -> Tensor:
        """Global attention of a dense (B, N, D) sequence with the relative position biases of `layout` (a
        `windows.Global`) added to the logits (a float mask, with `attn_mask`'s False as -inf)."""
        B, N, D = x.shape
        # (B, N, 3D) -> (3, B, heads, N, D/heads)
        q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        attn_mask = with_key_mask(layout.bias(self, q, torch.arange(N, device=x.device)[None]), attn_mask)
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return self.proj(merge_heads(x, True))  # (B, heads, N, D/heads) -> (B, N, D)

    def project_qkv(self, x: Tensor) -> Tensor:
        """(..., D) -> (..., 3D): queries, keys and values, token-major."""
        return self.qkv(x)

    def project_kv(self, x: Tensor) -> Tensor:
        """(..., D) -> (..., 2D): keys then values only (the last 2/3 of `qkv`), for tokens that are
        attended over but not queried (a key/value cache)."""
        dim = self.qkv.in_features
        bias = self.qkv.bias[dim:] if self.qkv.bias is not None else None
        return F.linear(x, self.qkv.weight[dim:], bias)

    def attend_rows(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        q_counts: Sequence[int],
        k_counts: Sequence[int],
        layout: Any = None,
        q_tokens: Tensor | None = None,
        k_tokens: Tensor | None = None,
    ) -> Tensor:
        """Per-image attention of query rows q (Tq, D) over key/value rows k, v (Tk, D), both
        grouped by image (`q_counts`/`k_counts` rows each, every count > 0), then `proj` -> (Tq, D).

        layout: a `windows.Global` for the relative position biases, with the token index of every query
        row `q_tokens` (Tq,) and of every key row `k_tokens` (Tk,) (None: each image's keys are all its
        tokens in order).

        One batched call when all images have the same counts (always at batch 1), else one call
        per image: exact and wasting nothing (a key-padding mask would leave the fused kernel).
        """
        H, d = self.num_heads, self.head_dim

        def bias(qh: Tensor, qs: slice, ks: slice, M: int) -> Tensor | None:
            kt = None if k_tokens is None else k_tokens[ks].view(M, -1)
            return layout.bias(self, qh, q_tokens[qs].view(M, -1), kt)

        if q_counts.count(q_counts[0]) == len(q_counts) and k_counts.count(k_counts[0]) == len(k_counts):
            B, nq, nk = len(q_counts), q_counts[0], k_counts[0]
            # (B*n, D) -> (B, heads, n, D/heads)
            qh = q.view(B, nq, H, d).transpose(1, 2)
            out = F.scaled_dot_product_attention(
                qh,
                k.reshape(B, nk, H, d).transpose(1, 2),
                v.reshape(B, nk, H, d).transpose(1, 2),
                attn_mask=None if layout is None else bias(qh, slice(None), slice(None), B),
            )
            return self.proj(merge_heads(out, layout is not None).reshape(B * nq, H * d))
        outs, qo, ko = [], 0, 0
        for nq, nk in zip(q_counts, k_counts):
            # (n, D) -> (1, heads, n, D/heads)
            qb, kb, vb = (
                t.reshape(1, -1, H, d).transpose(1, 2) for t in (q[qo : qo + nq], k[ko : ko + nk], v[ko : ko + nk])
            )
            mask = None if layout is None else bias(qb, slice(qo, qo + nq), slice(ko, ko + nk), 1)
            out = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask)
            outs.append(out[0].transpose(0, 1).reshape(nq, H * d))
            qo, ko = qo + nq, ko + nk
        return self.proj(torch.cat(outs))


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
        drop_path_rate: float = 0.0,
        rows: Any = None,
        attn_mask: Tensor | None = None,
        **mlp_kwargs: Any,
    ) -> Tensor:
        """x: tokens (B, N, D), or with `rows` the (T, D) rows of a token subset (stochastic depth
        then per image of the rows). `attn_mask`: see `Attention.forward`. `mlp_kwargs` go to the
        MLP (reViT: the merged expert weights)."""
        if drop_path_rate:  # stochastic depth of this application (`run_block` gives 0 in eval)
            drop = drop_path if rows is None else rows.drop_path  # the same signature (x, rate, training)
            x = x + drop(self.ls1(self.attn(self.norm1(x), rows, attn_mask)), drop_path_rate, self.training)
            return x + drop(self.ls2(self.mlp(self.norm2(x), **mlp_kwargs)), drop_path_rate, self.training)
        x = x + self.ls1(self.attn(self.norm1(x), rows, attn_mask))
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
