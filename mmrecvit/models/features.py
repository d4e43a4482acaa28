"""timm's feature API, which every backbone has (`ViTBackbone` derives from `TimmFeatures`): `forward_intermediates`
and `prune_intermediate_layers` with the semantics of timm's `VisionTransformer`, and the framework `forward` (mmdet,
mmseg, mmpretrain, detectron2) beside them; which layers `indices` names and the formats the intermediates come
in. The forward itself (image -> the states of some layers and this forward's statistics) is the backbone's
`forward_states`, which both call."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
from timm.models._features import feature_take_indices
from torch import Tensor, nn

from .checks import check_choice, check_int
from .embedding import to_maps
from .pruning import prune
from .stats import FeatureMaps

OUTPUT_FORMATS = ('NCHW', 'NLC')


def take_indices(indices: int | Sequence[int] | None, depth: int, owner: str) -> tuple[int, ...]:
    """timm's `feature_take_indices` over `depth` layers (an int n: the last n; a list: those, negatives from the
    end; None: all), sorted and unique, with one error naming `indices` and the layers allowed (cached: a forward
    asks for the same indices again and again)."""
    listed = isinstance(indices, Sequence) and not isinstance(indices, (str, bytes))
    if torch.compiler.is_compiling():  # traced once per graph: no cache (dynamo warns at a cached function)
        return _check_indices(indices, depth, owner)
    try:
        return _take_indices(tuple(indices) if listed else indices, depth, owner)
    except TypeError:  # an unhashable entry: checked without the cache (the error names it)
        return _check_indices(indices, depth, owner)


@functools.lru_cache(maxsize=64)
def _take_indices(indices: int | tuple[int, ...] | None, depth: int, owner: str) -> tuple[int, ...]:
    return _check_indices(indices, depth, owner)


def _check_indices(indices: Any, depth: int, owner: str) -> tuple[int, ...]:
    listed = isinstance(indices, Sequence) and not isinstance(indices, (str, bytes))
    if isinstance(indices, bool) or not (indices is None or isinstance(indices, int) or listed):
        raise TypeError(
            f'indices must be None, an int (the last n layers) or a list of layers, got {type(indices).__name__} '
            f'{indices!r}'
        )
    if listed:
        try:
            indices = [check_int('indices entry', i, -depth, depth - 1) for i in indices]
        except ValueError as e:  # out of range: which model, and how many layers it has (pruned: fewer)
            raise ValueError(f'{e} (this {owner} has {depth} layers)') from None
        if not indices:
            raise ValueError('indices must name at least one layer, got an empty list')
    try:
        take, _ = feature_take_indices(depth, indices)
    except AssertionError as e:  # timm asserts; one ValueError naming the argument instead
        raise ValueError(f'indices: {e} (this {owner} has {depth} layers)') from None
    return tuple(sorted(set(take)))


def timm_format(
    states: list[Tensor], grid: tuple[int, int], num_prefix: int, output_fmt: str, return_prefix_tokens: bool
) -> list:
    """States (B, N, D) -> timm's intermediates: maps (B, D, h, w) ('NCHW') or patch tokens (B, h*w, D) ('NLC'),
    the prefix tokens dropped, or kept beside each as (intermediate, prefix (B, P, D))."""
    out = list(to_maps(states, grid, num_prefix)) if output_fmt == 'NCHW' else [s[:, num_prefix:] for s in states]
    return list(zip(out, [s[:, :num_prefix] for s in states])) if return_prefix_tokens else out


class TimmFeatures:
    """timm's feature API and the framework forward of a `ViTBackbone` (the module docstring)."""

    def forward_intermediates(
        self,
        x: Tensor,
        indices: int | Sequence[int] | None = None,
        norm: bool = False,
        output_fmt: str = 'NCHW',
        intermediates_only: bool = False,
        stop_early: bool = False,
        compute: float | None = None,
        *,
        return_prefix_tokens: bool = False,
        return_stats: bool = False,
    ) -> Any:
        """Image -> the states of some layers with timm's semantics (`VisionTransformer.forward_intermediates`):
        the one way to get features (STYLE 7), which `forward` and the timm classifier call.

        indices: layers (`out_indices`' vocabulary; `features.take_indices`): an int n the last n, a list those
        (negatives from the end), None all; the intermediates come in layer order. norm: the final norm on each.
        output_fmt: 'NCHW' maps (B, D, h, w) or 'NLC' patch tokens (B, h*w, D), prefix tokens dropped (timm's;
        `return_prefix_tokens` keeps them beside each). intermediates_only: the list alone, else (final tokens
        (B, N, D) after the final norm, list). stop_early: no layer after the last one taken runs. compute: the
        test-time knob for this call (`compute.py`). return_stats: (result, the forward's `ForwardStats`).
        """
        L = self.kept_layers  # the layers it owns (`pruning.py`), as timm's after pruning
        take = take_indices(indices, L, self.feature_owner)
        if output_fmt not in OUTPUT_FORMATS:
            check_choice('output_fmt', output_fmt, OUTPUT_FORMATS)
        layers = take if stop_early or take[-1] == L - 1 else (*take, L - 1)
        states, final, stats = self.forward_states(x, layers, compute)
        states = states[: len(take)]
        intermediates = timm_format(
            [self.norm(s) for s in states] if norm else states,
            stats.grid,
            self.num_prefix_tokens,
            output_fmt,
            return_prefix_tokens,
        )
        result = intermediates if intermediates_only else (self.norm(final), intermediates)
        return (result, stats) if return_stats else result

    def forward(self, x: Tensor, compute: float | None = None) -> tuple[Tensor, ...]:
        """(B, C, H, W) -> `out_type`'s outputs (what mmdet/mmseg/mmpretrain and `mmrecvit.d2` call): maps (B, D,
        ceil(H/p), ceil(W/p)) of `out_indices` (the final norm, if any, on the last layer's, as mmpretrain's ViT)
        or a 1-tuple with the (B, D) classification feature, as a `FeatureMaps` tuple carrying this forward's
        statistics in `.stats` (a plain tuple while `torch.export` traces). `compute`: the knob for this call.
        What `forward_intermediates` returns, in the frameworks' form (no layer after the last one taken runs)."""
        L = self.kept_layers
        if self.out_type == 'featmap':
            layers = take_indices(self.out_indices, L, self.feature_owner)
            states, final, stats = self.forward_states(x, layers, compute)  # no layer after the last one taken
            if layers[-1] == L - 1 and not isinstance(self.norm, nn.Identity):
                states[-1] = self.norm(final)
            by_layer = dict(zip(layers, to_maps(states, stats.grid, self.num_prefix_tokens)))
            outputs = tuple(map(by_layer.__getitem__, self.out_indices))
        else:
            _, final, stats = self.forward_states(x, (L - 1,), compute)
            outputs = (self.pool(self.norm(final)),)
        # torch.export takes plain containers only (pytrees): a plain tuple there, the statistics stay eager.
        return outputs if torch.compiler.is_exporting() else FeatureMaps(outputs, stats)

    @property
    def feature_owner(self) -> str:
        """The model as `indices` errors name it: its class, and its pruning when pruned at build (`pruning.py`)."""
        if self.kept_layers == self.depth:
            return type(self).__name__
        return f'{type(self).__name__}, pruned at build ({self.pruned_after})'

    def pool(self, tokens: Tensor) -> Tensor:
        """(B, N, D) normalised final tokens -> (B, D): the CLS token, or the mean of the patch tokens."""
        return tokens[:, 0] if self.out_type == 'cls_token' else tokens[:, self.num_prefix_tokens :].mean(1)

    # ---- timm's pruning -------------------------------------------------------------------------
    def prune_intermediate_layers(
        self, indices: int | Sequence[int] = 1, prune_norm: bool = False, prune_head: bool = True
    ) -> list[int]:
        """timm's: keep the layers up to the last of `indices` and return them (sorted), cutting what they do not need
        (`pruning.prune`: the later layers of PlainViT and NaiveRecursiveViT, what no kept step of a recursive method
        reaches). `prune_norm`: the final norm becomes the identity. A backbone has no head (`prune_head` is for the
        classifier)."""
        return prune(self, take_indices(indices, self.kept_layers, self.feature_owner), prune_norm)
