"""torch.fx symbolic tracing of a backbone's forward (timm's FX feature extraction, torchvision's
`create_feature_extractor`, as timm's tests/test_models.py traces its models; docs/timm.md).

A forward's Python decisions read the input's patch grid (the schedule, the FLOP plan, whether `pos_embed` is
resampled) and `compute` (which setting runs). fx hands both in as proxies, on which no Python decision can be
made, so a traced graph is specialised as timm's fixed-size ViT is: to the model's own `img_size` grid and to
`compute=None` (the default forward). Each specialisation is a node of the graph that checks, when the graph
runs, that its input is what it was traced for (one error naming the argument), so a graph never computes
something else silently. The forwards whose token sets depend on the data (Edge-RecViT, MoR-ViT) cannot be traced
at all (docs/timm.md says which); the rest trace through their plain Python loops.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .embedding import patch_grid


def traced(x: Any) -> bool:
    """Whether `x` is a torch.fx proxy (its forward is being symbolically traced)."""
    return isinstance(x, torch.fx.Proxy)


def symbolic_tracing() -> bool:
    """Whether torch.fx is symbolically tracing (not torch.export or torch.compile, which trace differently)."""
    return torch.fx._symbolic_trace.is_fx_symbolic_tracing()


def specialise(model: Any, x: Tensor, compute: Any) -> tuple[Tensor, float | None, tuple[int, int]]:
    """While fx traces `model`'s forward: (x behind the graph's checks, None, the model's own grid) in place of (x,
    compute, the input's grid): the graph is the forward at the model's `img_size` with the default setting (module
    docstring). A forward fx cannot trace is one error saying why (`ViTBackbone.fx_untraceable`)."""
    reason = model.fx_untraceable()
    if reason:
        raise TypeError(f'torch.fx cannot trace {type(model).__name__}: {reason}')
    grid = model.pretrain_grid
    x = _on_grid(x, model.patch_size, grid)
    if traced(compute):  # the argument itself (a placeholder); a number given to the tracer stays as it is
        x, compute = _default_compute(x, compute), None
    return x, compute, grid


def _on_grid(x: Tensor, patch_size: int, grid: tuple[int, int]) -> Tensor:
    """x, after checking (when the traced graph runs) that its patch grid is the one the graph was traced for."""
    if patch_grid(x, patch_size) != tuple(grid):
        size = tuple(g * patch_size for g in grid)
        raise ValueError(
            f"this fx graph was traced for inputs of {size[0]}x{size[1]} pixels (the model's img_size), got "
            f'{tuple(x.shape[-2:])}: trace a model built with img_size={list(x.shape[-2:])}, or run the module itself'
        )
    return x


def _default_compute(x: Tensor, compute: float | None) -> Tensor:
    """x, after checking (when the traced graph runs) that `compute` is None, the setting the graph was traced at."""
    if compute is not None:
        raise ValueError(
            f'this fx graph was traced at compute=None (the default forward), got compute={compute!r}: run the '
            'module itself for the compute knob'
        )
    return x


# Leaves of the graph: they run on the real values when the traced graph runs, whichever tracer traced it
torch.fx.wrap('_on_grid')
torch.fx.wrap('_default_compute')
