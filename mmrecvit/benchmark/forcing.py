"""Fixed depth patterns for token-adaptive backbones: a harness knob, not a model argument.

To time Edge-RecViT at a chosen amount of work, independent of what an untrained ranker picks,
a spec may carry `forced_mean_depth=M` (and `forced_depth_seed=S`, default 0). The harness pops
both before constructing the model and sets the model's `depth_pattern` knob (ranker depths (B, Np)
int64 in 1..L -> the depths to run) to a seeded pattern of per-image mean M instead of the ranker's
choice. The ranker still runs (its cost is part of the model's), and the model's `depth_shift` /
`max_depth` still apply after the pattern. `forced_mean_depth=L` is the same model at full depth.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor, nn

from mmrecvit.models.checks import check_float, check_int

FORCING_KWARGS = ('forced_mean_depth', 'forced_depth_seed')


def _mean_depth_of(beta: float, levels: int) -> float:
    w = torch.softmax(beta * torch.arange(1, levels + 1, dtype=torch.float64), 0)
    return float((w * torch.arange(1, levels + 1, dtype=torch.float64)).sum())


# Cached: the bisection and the per-image fix-up cost more than a small forward, and every timed
# forward asks for the same pattern. Callers must not modify the returned tensor in place.
@functools.lru_cache(maxsize=16)
def forced_depths(batch: int, tokens: int, mean: float, levels: int, seed: int) -> Tensor:
    """A fixed, seeded depth pattern (B, tokens) in 1..levels whose per-image mean is `mean`.

    Depths are drawn i.i.d. per token from the tilted distribution p_l ~ exp(beta l) whose mean
    is `mean` (a spread of depths, as a trained ranker gives, rather than one value), then single
    tokens are moved by +-1 until each image's depth sum is round(mean * tokens). Images get
    different patterns (so their active-token counts differ, as with a real ranker) with the same
    mean. CPU tensor; deterministic in `seed`.
    """
    if mean >= levels:
        return torch.full((batch, tokens), levels, dtype=torch.long)
    if mean <= 1:
        return torch.ones(batch, tokens, dtype=torch.long)
    lo, hi = -60.0, 60.0
    for _ in range(100):  # bisection: the tilted mean grows with beta
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _mean_depth_of(mid, levels) < mean else (lo, mid)
    probs = torch.softmax(0.5 * (lo + hi) * torch.arange(1, levels + 1, dtype=torch.float64), 0)
    gen = torch.Generator().manual_seed(seed)
    depth = torch.multinomial(probs.expand(batch, levels), tokens, replacement=True, generator=gen) + 1
    target = round(mean * tokens)
    for b in range(batch):
        diff = target - int(depth[b].sum())
        while diff:
            step = 1 if diff > 0 else -1
            movable = ((depth[b] < levels) if step > 0 else (depth[b] > 1)).nonzero().squeeze(1)
            pick = movable[torch.randperm(len(movable), generator=gen)[: abs(diff)]]
            depth[b, pick] += step
            diff -= step * len(pick)
    return depth


def pop_depth_forcing(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Remove the forcing kwargs from `kwargs` (in place) and return them, so the constructor
    never sees them; `{}` when the spec asks for no forcing."""
    forcing = {k: kwargs.pop(k) for k in FORCING_KWARGS if k in kwargs}
    if forcing.get('forced_mean_depth') is None:
        if forcing.get('forced_depth_seed') is not None:
            raise ValueError('forced_depth_seed is the seed of a forced_mean_depth pattern; give forced_mean_depth too')
        return {}
    return forcing


def force_mean_depth(module: nn.Module, forced_mean_depth: float, forced_depth_seed: int = 0) -> None:
    """Make `module` execute the seeded depth pattern of per-image mean `forced_mean_depth`: its `depth_pattern`
    knob (Edge-RecViT's), so the model's shift/cap knobs behave as without forcing."""
    levels = getattr(module, 'depth', None)
    if not hasattr(module, 'depth_pattern') or not isinstance(levels, int):
        raise ValueError(
            f'forced_mean_depth needs a backbone that assigns per-token depths (`depth_pattern`, `depth`), e.g. '
            f'EdgeRecViT; {type(module).__name__} has none'
        )
    mean = check_float('forced_mean_depth', forced_mean_depth, 1.0, float(levels))
    seed = check_int('forced_depth_seed', forced_depth_seed, 0)
    module.depth_pattern = functools.partial(_pattern_like, mean=mean, levels=levels, seed=seed)


def _pattern_like(chosen: Tensor, mean: float, levels: int, seed: int) -> Tensor:
    """The forced pattern in the shape and on the device of the ranker's depths `chosen` (B, Np)."""
    return forced_depths(chosen.shape[0], chosen.shape[1], mean, levels, seed).to(chosen.device)
