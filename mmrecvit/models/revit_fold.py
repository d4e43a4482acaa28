"""reViT's dense twin: `fold_to_plainvit` materialises the L merged FFNs into a `PlainViT` with L blocks
(docs/methods/revit.md), what export and deployment run. Kept beside `revit.py` as the one place that knows both
state-dict layouts."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from .backbone import ViTBackbone
from .checkpoint import load_state_dict_strict
from .checks import check_int
from .experts import out_depth_to_step
from .revit import ReViT
from .vit import PlainViT


def plainvit_config(revit: ReViT, depth: int | None = None) -> dict[str, Any]:
    """Arguments of the dense twin with `depth` blocks (`PlainViT`): the sizes and what differs from defaults."""
    num_steps = revit.depth if depth is None else check_int('depth', depth, 2)
    grid = revit.pretrain_grid
    img_size = grid[0] * revit.patch_size if grid[0] == grid[1] else [g * revit.patch_size for g in grid]
    cfg: dict[str, Any] = dict(
        embed_dim=revit.embed_dim,
        num_heads=revit.num_heads,
        depth=num_steps,
        out_indices=[out_depth_to_step(d, num_steps) for d in revit._out_depths],
    )
    extras = dict(
        mlp_ratio=revit.mlp_ratio,
        qkv_bias=revit.qkv_bias,
        init_values=revit.init_values,
        patch_size=revit.patch_size,
        img_size=img_size,
        in_channels=revit.patch_embed.proj.in_channels,
        with_cls_token=revit.with_cls_token,
        use_rel_pos=revit.use_rel_pos,
    )
    defaults = inspect.signature(ViTBackbone.__init__).parameters
    cfg.update({k: v for k, v in extras.items() if v != defaults[k].default})
    return cfg


@torch.no_grad()
def fold_to_plainvit(revit: ReViT, depth: int | None = None) -> PlainViT:
    """Fold to dense: a `PlainViT` with L blocks computing what `revit` computes at depth L.

    Block t gets the shared attention, norms (and LayerScales) and the merged FFN θ̄_t of the grid
    `s_t = t/(L-1)`; patch/position/CLS embeddings are copied. The result is in eval mode, on the device and
    in the dtype of `revit`, with `out_indices` = `revit`'s outputs at depth L.
    """
    cfg = plainvit_config(revit, depth)
    num_steps = cfg['depth']
    _, _, ffn = revit.merged_ffns(num_steps)
    own = revit.state_dict()
    sd = {k: v for k, v in own.items() if not k.startswith(('block.', 'router.'))}
    shared = {
        k[len('block.') :]: v for k, v in own.items() if k.startswith('block.') and not k.startswith('block.mlp.')
    }
    for t, step in enumerate(ffn.unbind()):
        sd.update({f'blocks.{t}.{k}': v for k, v in shared.items()})
        sd.update({f'blocks.{t}.mlp.{name.replace("_", ".")}': w for name, w in step._asdict().items()})
    ref = revit.pos_embed
    dense = PlainViT(**cfg).to(device=ref.device, dtype=ref.dtype)
    load_state_dict_strict(dense, sd, f'reViT folded at depth {num_steps}')
    return dense.eval()
