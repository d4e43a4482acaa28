"""Per-forward statistics every backbone reports (SPEC §5, STYLE 8).

After each forward a backbone stores a `ForwardStats` in `backbone.stats`. Logging (the training
hook), FLOP counting and the depth-map tool all read these same numbers instead of re-deriving them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor


@dataclass
class StepWork:
    """Tokens one block application really processed, per image (means over the batch).

    queries: tokens whose queries, MLP and norms ran.
    keys: tokens attended over (queries plus any frozen/cached keys).
    new_kv: tokens whose keys/values were projected at this step without being queried
        (exited tokens entering the key/value cache).
    mlp_hidden: hidden width of the MLP that ran (for FLOP counting).
    attn_pairs: mean over images of (queries x keys) when counts differ between images;
        None means `queries * keys`.
    """

    queries: float
    keys: float
    new_kv: float = 0.0
    mlp_hidden: int = 0
    attn_pairs: float | None = None

    def flops(self, dim: int) -> float:
        """Analytic FLOPs (2 x multiply-accumulates of the matmuls) of this application, per image.

        qkv for the queried tokens, k/v for newly cached ones, q.k and attn.v, the output
        projection and the MLP. Norms, softmax and activations are not counted (the same
        convention as mmengine's/fvcore's counters).
        """
        pairs = self.queries * self.keys if self.attn_pairs is None else self.attn_pairs
        macs = (3 * dim * dim * self.queries          # qkv projection of queried tokens
                + 2 * dim * dim * self.new_kv         # k/v projection of tokens entering the cache
                + 2 * pairs * dim                     # q @ k^T and attn @ v
                + dim * dim * self.queries            # output projection
                + 2 * dim * self.mlp_hidden * self.queries)  # fc1 + fc2
        return 2.0 * macs


@dataclass
class ForwardStats:
    """What one forward of a backbone did.

    aux_losses: weighted auxiliary losses (scalar tensors with graph) to add to the task loss,
        named `loss_<what>` so mmengine sums and logs them.
    scalars: detached numbers for the training log (mean depth, fractions, gate values ...).
    token_maps: per-token tensors for visualisation, each (B, ..., h, w) on the patch grid, e.g.
        `depth` (B, h, w) or `mixture/unit0` (B, T, h, w). A backbone's `forward_states` stores
        them as (B, ..., h*w) over the patch tokens (no CLS); `get_intermediate_states` reshapes.
    tables: other per-forward tensors for tools that are not per token, e.g. reViT's gates
        `gates` (L, E).
    steps: one `StepWork` per block application, in execution order (FLOP counting).
    grid: the patch grid (h, w) of this forward.
    """

    aux_losses: dict[str, Tensor] = field(default_factory=dict)
    scalars: dict[str, Tensor] = field(default_factory=dict)
    token_maps: dict[str, Tensor] = field(default_factory=dict)
    tables: dict[str, Tensor] = field(default_factory=dict)
    steps: list[StepWork] = field(default_factory=list)
    grid: tuple[int, int] = (0, 0)

    def block_flops(self, dim: int) -> float:
        """Analytic FLOPs of all block applications of this forward, per image."""
        return sum(s.flops(dim) for s in self.steps)
