"""`RecViTClassifier`: a backbone of ours with a linear head, and timm's classifier and feature APIs.

    import mmrecvit, timm
    model = timm.create_model('srvit_small_patch16_224', num_classes=100, drop_path_rate=0.1)
    logits = model.eval()(images, compute=0.5)                     # the compute knob, per call
    final, maps = model.forward_intermediates(images, indices=4)    # timm's feature API
    features = timm.create_model('srvit_small_patch16_224', features_only=True, out_indices=(2, 5, 8, 11))

What timm's `VisionTransformer` offers, with its semantics: `forward_features` (the final normalised tokens),
`forward_head`, `reset_classifier`, `get_classifier`, `forward_intermediates` (indices as the last n or a list,
`norm`, `output_fmt` 'NCHW'/'NLC', `intermediates_only`, `stop_early`, `return_prefix_tokens`),
`prune_intermediate_layers`, `feature_info` (one entry per layer: `features_only=True` wraps the model in timm's
`FeatureGetterNet`), `set_grad_checkpointing`, `no_weight_decay`, `group_matcher` and `num_prefix_tokens`.
Every feature the classifier gives comes from the backbone's own `forward_intermediates` (STYLE 7), so the maps
are those of the mm and detectron2 adapters for the same layers. `compute` (a fraction of the full-depth FLOPs,
eval mode) is taken per call by `forward`, `forward_features` and `forward_intermediates`.

The backbone is the attribute `backbone` (state dict keys `backbone.*`, `head.*`), so a checkpoint of the
classifier loads into the dense det/seg backbone through `load_pretrained` (the head and the final norm are
dropped and listed) and any checkpoint our backbones load into the classifier (`load_pretrained` here:
`weights.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from timm.layers import trunc_normal_
from torch import Tensor, nn

from ..adapters import layer_depth_table
from ..models import ViTBackbone
from ..models.features import take_indices
from .weights import load_pretrained

# timm's global_pool -> our out_type; '' (timm's "no pooling": forward_head passes the (B, N, D) tokens on) leaves
# the backbone's out_type as it is, a classification output's at construction (the final norm on)
POOLS = {'token': 'cls_token', 'avg': 'avg_featmap', '': 'avg_featmap'}


class RecViTClassifier(nn.Module):
    """A backbone of ours with a linear head and timm's classifier and feature APIs (module docstring).

    Args:
        backbone: a backbone of ours, built with `out_type` from `global_pool`.
        num_classes: classes of the head (0: no head, `forward` gives the pooled features).
        global_pool: 'token' (the CLS token, DeiT's classifier), 'avg' (mean of the patch tokens) or '' (none:
            `forward_head` and `forward` give the (B, N, D) tokens, as timm's ViT).
        drop_rate: dropout before the head (timm's `drop_rate`).
    """

    def __init__(
        self, backbone: ViTBackbone, num_classes: int = 1000, global_pool: str = 'token', drop_rate: float = 0.0
    ) -> None:
        super().__init__()
        if backbone.out_type not in POOLS.values():
            raise ValueError(
                f'the backbone of a classifier needs out_type in {list(POOLS.values())}, got {backbone.out_type!r}'
            )
        self.backbone = backbone
        # timm's contract (its tests/test_models.py): the unpooled and the pre-logits widths, both D here
        self.num_features = self.head_hidden_size = self.embed_dim = backbone.embed_dim
        self.in_chans = backbone.patch_embed.proj.in_channels
        self.num_prefix_tokens = backbone.num_prefix_tokens
        self.has_class_token = backbone.with_cls_token
        # timm's per-layer feature_info; `module` names the layer: a layer of a recursive method has no module of
        # its own (a shared block runs several), so timm's hook and fx feature classes cannot take it, and a
        # name must still be unique (transformers' stage names): our features come from forward_intermediates
        self.feature_info = [
            dict(module=f'layer{i}', num_chs=self.embed_dim, reduction=backbone.patch_size)
            for i in range(backbone.depth)
        ]
        self.stops_early = False  # set by prune_intermediate_layers on a backbone that cannot be cut
        self.head_drop = nn.Dropout(drop_rate)
        self.reset_classifier(num_classes, global_pool)

    # ---- timm's classifier API ----------------------------------------------------------------
    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool: str | None = None) -> None:
        if global_pool is not None:
            if global_pool not in POOLS:
                raise ValueError(f'global_pool must be one of {list(POOLS)}, got {global_pool!r}')
            if global_pool == 'token' and not self.backbone.with_cls_token:
                raise ValueError("global_pool='token' needs a backbone with a CLS token")
            self.global_pool = global_pool
            if global_pool:
                self.backbone.out_type = POOLS[global_pool]
        self.num_classes = num_classes
        self.head = nn.Linear(self.embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        if num_classes > 0:
            trunc_normal_(self.head.weight, std=0.02)
            nn.init.zeros_(self.head.bias)

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        self.backbone.with_cp = enable

    def no_weight_decay(self) -> set[str]:
        return {'backbone.pos_embed', 'backbone.cls_token'}

    def group_matcher(self, coarse: bool = False) -> Callable[[str], float]:
        """timm's parameter grouping (layer decay: `param_groups_layer_decay`): parameter name -> its layer depth
        in our recursion-aware rule (`models/layer_decay.py`: embeddings 0, a block the mean of the layer positions
        it runs at, the rest `num_layers + 1`); the head `num_layers + 1` (lr scale 1). timm ranks the distinct
        depths (`optim.py`). `coarse` changes nothing: the groups are already the layers."""
        table = {name: depth for name, depth, _ in layer_depth_table(self).values()}
        top = float(self.backbone.num_layers + 1)
        return lambda name: table.get(name, top)

    def load_pretrained(self, path: str) -> None:
        """A checkpoint file our backbones load, strictly (timm's `custom_load`; `weights.py`)."""
        load_pretrained(self, path)

    def forward_features(self, x: Tensor, compute: float | None = None) -> Tensor:
        """(B, C, H, W) -> the final token states (B, N, D) after the final norm."""
        tokens, _ = self.backbone.forward_intermediates(x, 1, output_fmt='NLC', compute=compute)
        return tokens

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        x = self.head_drop(self.backbone.pool(x) if self.global_pool else x)  # '': no pooling (timm's)
        return x if pre_logits else self.head(x)

    def forward(self, x: Tensor, compute: float | None = None) -> Tensor:
        if self.training and compute is None and hasattr(self.backbone, 'gumbel_tau'):
            raise RuntimeError(
                f'{type(self.backbone).__name__} trains with its temperature schedule and its CCE loss, which a '
                "loop calling model(x) (timm's train.py) does not run: it would train at a fixed tau with plain "
                'cross-entropy. Train it with configs/cls/edgerecvit-*.py (mmpretrain: TemperatureScheduleHook, '
                'ConfidenceScaledClassifier), or in a loop of your own anneal model.backbone.gumbel_tau '
                '(mmrecvit.adapters.TemperatureSchedule), scale the logits of forward_head(forward_features(x)) by '
                "the mean of the forward's confidence map (mmrecvit/mm/cce.py) and add its aux losses (docs/timm.md)"
            )
        return self.forward_head(self.forward_features(x, compute))

    # ---- timm's feature API -------------------------------------------------------------------
    def forward_intermediates(
        self,
        x: Tensor,
        indices: int | Sequence[int] | None = None,
        return_prefix_tokens: bool = False,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = 'NCHW',
        intermediates_only: bool = False,
        compute: float | None = None,
        return_stats: bool = False,
    ) -> Any:
        """timm's `VisionTransformer.forward_intermediates`, in its argument order: the backbone's (`indices` None
        for all layers, n for the last n, or a list; `norm`; `output_fmt` 'NCHW' or 'NLC'; `return_prefix_tokens`,
        which smp's DPT reads; `compute` for this call; `return_stats`: (result, the forward's `ForwardStats`, whose
        `aux_losses` a training loop adds). The final output is `forward_features`'. After
        `prune_intermediate_layers` on a method that cannot be cut, it stops early (the pruned layers do not run)."""
        return self.backbone.forward_intermediates(
            x,
            indices,
            norm=norm,
            output_fmt=output_fmt,
            intermediates_only=intermediates_only,
            stop_early=stop_early or self.stops_early,
            compute=compute,
            return_prefix_tokens=return_prefix_tokens,
            return_stats=return_stats,
        )

    def prune_intermediate_layers(
        self, indices: int | Sequence[int] | None = 1, prune_norm: bool = False, prune_head: bool = True
    ) -> list[int]:
        """timm's: what no layer up to the last of `indices` needs goes (`pruning.prune`: the later layers of PlainViT
        and NaiveRecursiveViT, what no kept step of a recursive method reaches; reViT's one block stays and its
        forward stops early instead), the final norm (`prune_norm`) and the head (`prune_head`) become
        identities; returns the indices as sorted absolute layers. None: the backbone's `out_indices` (what
        timm's feature wrapper passes for `features_only=True` without `out_indices`)."""
        indices = list(self.backbone.out_indices) if indices is None else indices
        take = take_indices(indices, self.backbone.kept_layers, self.backbone.feature_owner)
        self.backbone.prune_intermediate_layers(take, prune_norm=prune_norm)  # what no kept layer needs goes
        self.stops_early = self.stops_early or take[-1] < self.backbone.kept_layers - 1  # reViT: nothing to cut
        if prune_head:
            self.reset_classifier(0)
        return list(take)
