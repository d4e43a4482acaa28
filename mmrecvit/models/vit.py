"""The two baselines: PlainViT, L distinct blocks, and NaiveRecursiveViT, k blocks applied cyclically
(docs/methods/baselines.md).

Both run one block per layer over every token, the base class's own generator and FLOP model
(`ViTBackbone.iter_layers`, `layer_blocks`); the compute knob runs the first K of the L layers. Design notes and
measured figures: docs/methods/baselines.md.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from .arguments import renamed, resolve_sizes
from .backbone import ViTBackbone
from .checkpoint import pick_or_average_blocks, split_timm_blocks
from .checks import check_choice, check_int, check_renamed
from .registry import register_backbone


@register_backbone('plainvit')
class PlainViT(ViTBackbone):
    """DeiT-style ViT with L distinct blocks: the unshared reference (docs/methods/baselines.md).

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' (aliases 'ti', 's', 'b', 'l'); `embed_dim`, `depth` and
            `num_heads` override the table.
        depth: L, layers = blocks (default from `arch`: 12).
        compute: the baseline of the test-time knob: the first K of the L layers, K the largest whose FLOPs
            are <= compute x those of all L (at least 1); the outputs are read at the rescaled layers.
        Other arguments (`out_indices`, ...): see `ViTBackbone`.
    """

    def __init__(
        self,
        arch: str = 'small',
        *,
        depth: int | None = None,
        **kwargs: Any,
    ) -> None:
        sizes = resolve_sizes(arch, depth, kwargs)
        super().__init__(**sizes, **kwargs)
        self.blocks = nn.ModuleList(self.make_block() for _ in range(self.depth))
        self.layer_blocks = tuple(range(self.depth))  # block t at layer t

    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """Identity: our names are timm's (block i <- timm block i)."""
        return dict(state_dict)


@register_backbone('naiverecvit')
class NaiveRecursiveViT(ViTBackbone):
    """k distinct blocks applied cyclically over L layers (docs/methods/baselines.md): layer t runs
    `blocks[t % k]`; only states are read out (no mixing), the "naive recursion" reference that degrades as
    recursion grows.

    Args:
        num_blocks: k, the unique blocks (default 3, at most `depth`).
        depth: L, the layers (default from `arch`: 12).
        compute: as `PlainViT`'s: the first K of the L layers (the cycle cut from the end).
        shared_init: how unique block j is initialised from an n-block timm checkpoint (docs/methods/baselines.md,
            which says why the default is not a mapping to the schedule): 'cycle' (default): the mean of the checkpoint
            blocks at the layers block j runs, t = j, j + k, ... (block t * n // L of the checkpoint for layer
            t), so every layer starts from a mean that contains the DeiT block of its own depth; 'pick': block
            j * (n/k); 'average': the mean of the j-th group of n/k consecutive blocks (which match
            a schedule that runs the groups consecutively, not the cycle this model runs).
        Other arguments: see `ViTBackbone`.
    """

    def __init__(
        self,
        arch: str = 'small',
        *,
        depth: int | None = None,
        num_blocks: int = 3,
        shared_init: str = 'cycle',
        **kwargs: Any,
    ) -> None:
        check_renamed('NaiveRecursiveViT', kwargs, {'num_unique_blocks': 'num_blocks'})
        shared_init = renamed('NaiveRecursiveViT', kwargs, 'timm_init', 'shared_init', shared_init, 'cycle')
        sizes = resolve_sizes(arch, depth, kwargs)
        super().__init__(**sizes, **kwargs)
        k = check_int('num_blocks', num_blocks, 1, self.depth)
        self.shared_init = check_choice('shared_init', shared_init, ['cycle', 'pick', 'average'])
        self.blocks = nn.ModuleList(self.make_block() for _ in range(k))
        self.layer_blocks = tuple(t % k for t in range(self.depth))  # the cycle: layer t runs block t % k

    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        rest, blocks = split_timm_blocks(state_dict)
        k, n, L = self.num_blocks, len(blocks), self.depth
        if self.shared_init == 'cycle':
            groups = [[t * n // L for t in range(j, L, k)] for j in range(k)]
            rest.update(pick_or_average_blocks(blocks, groups, 'average', prefix='blocks'))
            return rest
        if n % k:
            raise ValueError(
                f'cannot map a {n}-block checkpoint onto num_blocks={k} with shared_init='
                f"{self.shared_init!r}: {n} must be a multiple of {k} (shared_init='cycle' maps any)"
            )
        groups = [list(range(j * (n // k), (j + 1) * (n // k))) for j in range(k)]
        rest.update(pick_or_average_blocks(blocks, groups, self.shared_init, prefix='blocks'))
        return rest
