"""reViT's elastic-depth training: step dropout, each image running its kept steps as a shorter reViT
(docs/methods/revit.md).

Per image each whole step is dropped with probability p (at least 2 kept); the K kept steps are renumbered and
their depth coordinates re-spread, s_k = k/(K-1), so image b computes exactly reViT at depth K_b. The forward
(`ReViT.iter_layers`) runs each step once per group of images that share a coordinate row (`image_groups`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from .experts import depth_coordinates


def sample_kept_steps(batch: int, num_steps: int, drop_rate: float) -> Tensor:
    """(B, L) bool: per image, the steps that survive step dropout with `drop_rate`, at least 2 (elastic depth,
    docs/methods/revit.md; when fewer survive, the missing ones are drawn uniformly from the image's dropped steps)."""
    keep = torch.rand(batch, num_steps) >= drop_rate
    # Kept steps rank first, then the dropped ones in random order: top-2 tops up short rows.
    top2 = (torch.rand(batch, num_steps) + keep.float()).topk(2, dim=1).indices
    short = keep.sum(1) < 2
    keep[short] = keep[short].scatter(1, top2[short], True)
    return keep


def image_groups(kept: Tensor, layers: Sequence[int]) -> tuple[list[float], list[dict], list[dict], list[int]]:
    """Step dropout's schedule: (coords, runs, reads, counts) for a (B, L) kept mask and requested `layers`.

    Each image runs its K kept steps as a K-step reViT: kept step k gets coordinate k/(K-1) (re-spread), and
    requested layer i of L is read at its kept step number max(1, floor((i+1)K/L)). coords lists the distinct
    coordinates (the nominal L-grid first); runs[t] maps a coordinate row to the images applying step t with
    it, reads[t] an output to the images read after step t (None: the whole batch), counts[u] the (image, step)
    applications of row u.
    """
    batch, num_steps = kept.shape
    coords = depth_coordinates(num_steps)
    row = {c: u for u, c in enumerate(coords)}
    counts = [0] * num_steps
    runs: list[dict[int, list[int]]] = [{} for _ in range(num_steps)]
    reads: list[dict[int, list[int]]] = [{} for _ in range(num_steps)]
    for b, mask in enumerate(kept.tolist()):
        steps = [t for t, k in enumerate(mask) if k]
        K = len(steps)
        targets = [steps[max(1, (i + 1) * K // num_steps) - 1] for i in layers]
        for j, t in enumerate(targets):
            reads[t].setdefault(j, []).append(b)
        for k, t in enumerate(steps):
            if t > max(targets):
                break
            u = row.setdefault(k / (K - 1), len(coords))  # s_k = k/(K-1): coordinates re-spread
            if u == len(coords):
                coords.append(k / (K - 1))
                counts.append(0)
            counts[u] += 1
            runs[t].setdefault(u, []).append(b)

    def whole(groups: dict[int, list[int]]) -> dict[int, list[int] | None]:  # None: every image, in batch order
        return {key: None if len(images) == batch else images for key, images in groups.items()}

    return coords, [whole(r) for r in runs], [whole(r) for r in reads], counts


def image_index(images: list[int] | None, device: torch.device) -> Tensor | None:
    """The images of a group (`image_groups`) as an index tensor; None: the whole batch."""
    return None if images is None else torch.tensor(images, device=device)


def take_images(x: Tensor, index: Tensor | None) -> Tensor:
    """Rows `index` of `x` (the images of a group, `image_groups`); None: all rows."""
    return x if index is None else x.index_select(0, index)


def put_images(dst: Tensor, index: Tensor | None, src: Tensor) -> Tensor:
    """Rows `index` of `dst` replaced by `src`, out of place (autograd-safe); None: all rows."""
    return src if index is None else dst.index_copy(0, index, src)
