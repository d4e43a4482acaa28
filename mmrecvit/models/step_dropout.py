"""reViT's elastic-depth training: step dropout, each image running its kept steps as a shorter reViT
(docs/methods/revit.md, "Elastic depth in training").

Each image (each group of B/G consecutive images, G = gcd(B, `step_drop_groups`)) runs each step with probability
m = E[max(K0, 2)]/L, K0 ~ Binomial(L, 1 - p) (the paper's 1 - p with our top-up to 2 steps: `keep_rate`),
independently over the steps; its K kept steps are renumbered and their depth coordinates re-spread, s_k = k/(K-1),
so it computes exactly reViT at depth K. What is drawn, on the device with no host sync and static shapes: at every
step a uniformly random ranking of the G groups; the first floor(q) run, q = m G, and the next one with probability
q - floor(q) (it runs the block either way and its result is discarded when not kept, so every step is one block call
over C = ceil(q) groups). So per image each step is kept with probability m, but within a step the kept count is
floor(q) or floor(q) + 1 rather than binomial. A group left with fewer than 2 steps takes steps from groups that keep
at least 3 (`sample_steps`).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
from torch import Tensor

TOP_UP_ROUNDS = 3  # a top-up displaces a group that keeps >= 3: repeated, claims that found no place find one


class StepDrop(NamedTuple):
    """One draw of step dropout over G groups and L steps (all on the device).

    kept: (L, G) bool, the steps each group keeps. slots: (L, C) long, the groups each step runs (C = ceil(q), the
    kept ones first). slot_kept: (L, C) bool, whether the slot's result is kept. coords: (L, C) float32, the slot's
    depth coordinate k/(K-1) in its group's own K-step reViT. rank: (L, G) long, k, the kept step number (valid where
    kept). depth: (G,) long, K.
    """

    kept: Tensor
    slots: Tensor
    slot_kept: Tensor
    coords: Tensor
    rank: Tensor
    depth: Tensor

    def destinations(self) -> Tensor:
        """(L, C) long: the row of the state (G groups, then C spare rows) each slot's result is written to: its
        group's, or spare row G + j when the slot is not kept (a spare row is never read)."""
        G, C = self.kept.shape[1], self.slots.shape[1]
        return torch.where(self.slot_kept, self.slots, torch.arange(G, G + C, device=self.slots.device))

    def reads(self, layer: int, num_steps: int) -> Tensor:
        """(L, G) bool: where each group's state is layer `layer` of `num_steps` (its kept step number
        max(1, floor((layer+1) K / L)) - 1, docs/methods/revit.md "Outputs by relative depth")."""
        target = ((layer + 1) * self.depth // num_steps).clamp(min=1) - 1
        return self.kept & (self.rank == target)


def num_groups(batch: int, groups: int) -> int:
    """G: the groups of consecutive images that share their kept steps, gcd(B, `step_drop_groups`)."""
    return math.gcd(batch, groups)


def keep_rate(num_steps: int, drop_rate: float) -> float:
    """The share of the steps an image runs under the paper's rule with our top-up to 2: E[max(K0, 2)] / L, K0 ~
    Binomial(L, 1 - p) (1 - p up to 1.5e-5 at L = 12, p = 0.3; 0.17 rather than 0.05 at p = 0.95)."""
    L, keep = num_steps, 1 - drop_rate
    return sum(max(k, 2) * math.comb(L, k) * keep**k * drop_rate ** (L - k) for k in range(L + 1)) / L


def slots_per_step(groups: int, num_steps: int, drop_rate: float) -> int:
    """C = ceil(q), q = `keep_rate` x G: the groups every step runs (static, whatever is drawn)."""
    return min(groups, max(1, math.ceil(keep_rate(num_steps, drop_rate) * groups - 1e-9)))


def sample_steps(groups: int, num_steps: int, drop_rate: float, device: torch.device | None = None) -> StepDrop:
    """Draw step dropout for `groups` groups (module docstring). At least 2 kept steps per group: a group left with
    fewer takes random steps among its dropped ones, in the place of the step's lowest-ranked kept group that keeps
    3 or more (only when a step holds more such claims than kept places, at tiny G and L, can a group keep fewer:
    it then runs K = 1 at s = 0 or no step)."""
    L, G = num_steps, groups
    q = keep_rate(L, drop_rate) * G
    low, C = math.floor(q + 1e-9), slots_per_step(G, L, drop_rate)
    score = torch.rand(L, G, device=device)
    count = low + (torch.rand(L, 1, device=device) < q - low).long()  # (L, 1): floor(q), +1 w.p. q - floor(q)
    order = score.argsort(1, descending=True).argsort(1)  # (L, G): each group's place in the step's ranking
    kept, place = order < count, torch.arange(C, device=score.device)
    slots = score.topk(C, dim=1).indices  # (L, C): kept first, then the step's best dropped group
    for _ in range(TOP_UP_ROUNDS):
        # Top-up: a short group's best 2 steps (kept first, then random: `topk` of kept + noise, preferring steps with
        # a place left) claim places ahead of every kept group but those that keep <= 2; the step's lowest-ranked
        # other kept group yields (it keeps >= 3), or the step's spare slot takes it.
        depth = kept.sum(0)  # (G,)
        room = (count < C) | (kept & (depth > 2)).any(1, keepdim=True)  # (L, 1)
        pick = (2 * kept + room + torch.rand(L, G, device=score.device)).topk(2, dim=0).indices
        claims = torch.zeros_like(kept).scatter_(0, pick, True) & (depth < 2) | kept & (depth <= 2)
        slots = (score + kept + 2 * claims).topk(C, dim=1).indices
        count = torch.maximum(count, claims.sum(1, keepdim=True))
        kept = torch.zeros_like(kept).scatter_(1, slots, place < count)
    slot_kept = place < count
    rank, depth = kept.cumsum(0) - 1, kept.sum(0)
    # s = k/(K-1), divided in float64 as Python divides the L-grid's t/(L-1): the same rational is the same float32.
    coords = (rank.double() / (depth - 1).clamp(min=1).double()).clamp(0, 1).float()
    return StepDrop(kept, slots, slot_kept, coords.gather(1, slots), rank, depth)


def gather_reads(draw: StepDrop, results: Tensor, layers: list[int]) -> list[Tensor]:
    """Layer i of each group, for each of `layers`: the result of its own kept step (`StepDrop.reads`), from `results`
    (L C + G, g, N, D), every step's C slots then the input groups (a group that kept no step reads its input); one
    gather for all the layers (its backward one buffer of `results`' size, not one per layer) -> R tensors (B, N, D)."""
    L, C = draw.slots.shape
    G = draw.kept.shape[1]
    places = torch.arange(G, device=results.device)
    slot_of = torch.zeros_like(draw.kept, dtype=torch.long).scatter_(1, draw.slots, places[:C].expand(L, C))
    hits = torch.stack([draw.reads(i, L) for i in layers])  # (R, L, G): at most one step per group
    t = hits.long().argmax(1)  # (R, G), the step where each group reads each layer
    index = torch.where(hits.any(1), t * C + slot_of.gather(0, t), L * C + places)
    return results.index_select(0, index.flatten()).unflatten(0, (len(layers), -1)).flatten(1, 2).unbind()


def per_image(mask: Tensor, group_size: int) -> Tensor:
    """(..., G) -> (..., G g): a group's value for each of its images."""
    return mask.unsqueeze(-1).expand(*mask.shape, group_size).flatten(-2)


def logit_labels(K: int, slots: int = 0) -> tuple[str, ...]:
    """The rows of a router-logits table for the finiteness check: the K steps of the grid (s = t/(K-1)), then under
    step dropout each step's `slots` groups (at their own coordinates, drawn on the device: not printed, as a
    coordinate read from the draw is a symbolic float under torch.compile, which a format spec cannot print)."""
    if torch.compiler.is_compiling():  # traced once per graph: no cache (dynamo warns at a cached function)
        return _logit_labels.__wrapped__(K, slots)
    return _logit_labels(K, slots)


@functools.cache  # the same rows every forward of K steps: built once (a forward makes no Python call for them)
def _logit_labels(K: int, slots: int) -> tuple[str, ...]:
    grid = [f'step {t} (s={t / (K - 1):.3g})' for t in range(K)]  # Python ints: constants while compiling
    slot_rows = [f'step {t}, group slot {j} (its own kept-step coordinate)' for t in range(K) for j in range(slots)]
    return tuple(grid + slot_rows)
