"""timm's feature conventions for `ViTBackbone.forward_intermediates`: which layers `indices` names, and the
formats the intermediates come in (timm's `VisionTransformer.forward_intermediates`)."""

from __future__ import annotations

from collections.abc import Sequence

from timm.models._features import feature_take_indices
from torch import Tensor

from .checks import check_int
from .embedding import to_maps

OUTPUT_FORMATS = ('NCHW', 'NLC')


def take_indices(indices: int | Sequence[int] | None, depth: int, owner: str) -> list[int]:
    """timm's `feature_take_indices` over `depth` layers (an int n: the last n; a list: those, negatives from the
    end; None: all), sorted and unique, with one error naming `indices` and the layers allowed."""
    listed = isinstance(indices, Sequence) and not isinstance(indices, (str, bytes))
    if isinstance(indices, bool) or not (indices is None or isinstance(indices, int) or listed):
        raise TypeError(
            f'indices must be None, an int (the last n layers) or a list of layers, got {type(indices).__name__} '
            f'{indices!r}'
        )
    if listed:
        indices = [check_int('indices entry', i, -depth, depth - 1) for i in indices]
        if not indices:
            raise ValueError('indices must name at least one layer, got an empty list')
    try:
        take, _ = feature_take_indices(depth, indices)
    except AssertionError as e:  # timm asserts; one ValueError naming the argument instead
        raise ValueError(f'indices: {e} (this {owner} has {depth} layers)') from None
    return sorted(set(take))


def timm_format(
    states: list[Tensor], grid: tuple[int, int], num_prefix: int, output_fmt: str, return_prefix_tokens: bool
) -> list:
    """States (B, N, D) -> timm's intermediates: maps (B, D, h, w) ('NCHW') or patch tokens (B, h*w, D) ('NLC'),
    the prefix tokens dropped, or kept beside each as (intermediate, prefix (B, P, D))."""
    out = list(to_maps(states, grid, num_prefix)) if output_fmt == 'NCHW' else [s[:, num_prefix:] for s in states]
    return list(zip(out, [s[:, :num_prefix] for s in states])) if return_prefix_tokens else out
