"""Layer-wise learning-rate decay that understands recursion: free functions over layer positions (STYLE 12).

As detectron2's `get_vit_lr_decay_rate`, a parameter's learning-rate factor is `rate ** (num_layers + 1 - depth)`
from its layer depth, `num_layers` the L layers as detectron2 and mmpretrain count them (depths run 0..L + 1);
what recursion adds is how a depth is found. A backbone says only where its modules
run (`ViTBackbone.layer_positions`, by default read from its full schedule: module -> the layer position of
every block application that runs it, 1-based); these functions do the rest, for the mm and the d2
adapter alike.

The rule (our decision; BEiT/ViTDet's for a plain ViT, extended to recursion):

* embeddings (the patch embedding, CLS, positions): depth 0.
* a parameter of a module that block applications at positions p_1..p_k run: the mean (p_1 + ... + p_k) / k.
  A block used once keeps the plain-ViT depth, so PlainViT (and SR-ViT at T=1) get exactly BEiT's groups.
  For a shared block the mean gives it the geometric mean of the lr scales its k applications would get as
  separate layers: neither extreme wins. The first application (min) would give reViT's one block, i.e.
  nearly the whole backbone, the embeddings' rate (0.65^12 = 0.006: frozen); the last (max) would switch the
  decay off. The mean does not depend on the decay rate.
* everything else (routers, rankers, step transforms, a final norm): `num_layers + 1`, lr scale 1 as the neck and
  heads. These method parameters are not in a pretrained checkpoint (they keep their zero/small
  initialisation): nothing pretrained to preserve, and a zero-initialised router at rate^k would hardly leave
  its initialisation.

What one rate means across methods (`POLICIES`, the mm constructor's `layer_decay_policy`). 'per_layer' applies the
rate as written to every backbone: then "0.7" hides up to a 3x different mean learning rate between methods (a
shared block at its mean position sits where a plain ViT's middle layers are: reViT's one block gets 0.7^6.5 = 0.10,
a plain ViT's parameters 0.19 on average). 'matched' (our decision, docs/comparison.md) reads the rate as what it
does to a plain ViT: each backbone gets the rate at which the parameter-weighted mean lr scale of its embeddings and
blocks (every parameter at a depth <= L) equals that of a plain ViT of its width and depth at the written rate
(`matched_rate`), so every method's pretrained parameters move as far on average as the plain ViT's, the order
of its depths kept. A plain ViT, and SR-ViT (its blocks at DeiT's depths), get the written rate itself; the method's
own parameters (depth L + 1) keep scale 1 under both policies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from torch import nn

# Parameters that form the input tokens: depth 0 (names or module prefixes).
EMBEDDING_PARAMETERS = ('patch_embed', 'cls_token', 'pos_embed')
POLICIES = ('per_layer', 'matched')  # what a layer_decay_rate means (module docstring)


def positions(steps: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """(module name, layer) of every step of a full forward -> module name -> the 1-based layer positions it runs at
    (what `ViTBackbone.layer_positions` hands the functions below)."""
    out: dict[str, list[int]] = {}
    for name, layer in steps:
        out.setdefault(name, []).append(layer + 1)
    return out


def num_layers(positions: Mapping[str, Sequence[int]]) -> int:
    """L, the layers: the highest layer position (detectron2's and mmpretrain's `num_layers`)."""
    return max(max(p) for p in positions.values())


def layer_depth(
    name: str, positions: Mapping[str, Sequence[int]], embeddings: Iterable[str] = EMBEDDING_PARAMETERS
) -> float:
    """Layer depth in [0, `num_layers(positions)` + 1] of the parameter `name` (the module docstring's rule); a
    float, an integer value for parameters used at one position."""

    def under(prefix: str) -> bool:
        return name == prefix or name.startswith(prefix + '.')

    if any(under(p) for p in embeddings):
        return 0.0
    owners = [m for m in positions if under(m)]
    if not owners:
        return float(num_layers(positions) + 1)
    used = positions[max(owners, key=len)]  # the innermost listed module
    return sum(used) / len(used)


def lr_scale(rate: float, depth: float, num_layers: int) -> float:
    """The learning-rate factor of a parameter at `depth` of `num_layers` layers: rate ** (num_layers + 1 - depth)
    (BEiT/ViTDet; detectron2's `get_vit_lr_decay_rate`)."""
    return rate ** (num_layers + 1 - depth)


def parameter_depth(model: nn.Module, name: str, positions: Mapping[str, Sequence[int]]) -> float:
    """`layer_depth` of the parameter `name` of `model`, a `KeyError` naming it when the model has no such one."""
    names = dict(model.named_parameters())
    if name not in names:
        raise KeyError(
            f'{name!r} is not a parameter of {type(model).__name__}; pass a name from named_parameters(), e.g. '
            f'{next(iter(names))!r}'
        )
    return layer_depth(name, positions)


def mean_lr_scale(rate: float, depths: Iterable[tuple[float, int]], num_layers: int) -> float:
    """The parameter-weighted mean lr scale of (depth, numel) pairs at `rate`."""
    pairs = list(depths)
    total = sum(n for _, n in pairs)
    return sum(n * lr_scale(rate, d, num_layers) for d, n in pairs) / total


def matched_rate(rate: float, depths: Sequence[tuple[float, int]], num_layers: int, block_numel: int) -> float:
    """The 'matched' policy (module docstring): the rate r at which the mean lr scale of a backbone's embeddings and
    blocks (`depths`: (depth, numel) of every parameter; those at depth L + 1 are not counted) equals that of a plain
    ViT at `rate`: the same embeddings (depth 0) and L blocks of `block_numel` at depths 1..L. A bisection: the mean
    grows with r (every counted depth is <= L, so every exponent is >= 1)."""
    counted = [(d, n) for d, n in depths if d <= num_layers]
    embeddings = sum(n for d, n in counted if d == 0)
    plain = [(0.0, embeddings)] * bool(embeddings) + [(float(d), block_numel) for d in range(1, num_layers + 1)]
    target = mean_lr_scale(rate, plain, num_layers)
    if abs(mean_lr_scale(rate, counted, num_layers) - target) <= 1e-12 * target:
        return rate  # a plain ViT's depths: the written rate itself, not a bisection's approximation of it
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_lr_scale(mid, counted, num_layers) < target else (lo, mid)
    return (lo + hi) / 2
