"""Pruning: timm's `prune_intermediate_layers` cut, and the pruning at build of a backbone whose `out_indices` stop
before its last layer (issue 48.4; docs/multi_node.md, "DDP").

A dense backbone's forward stops after the last layer it reads (`ViTBackbone.forward_states`), so the layers after
it, their blocks and the final norm, never receive a gradient. DDP with `find_unused_parameters=False`, every
recipe's, then fails on the second iteration ("Expected to have finished reduction"). timm's answer for its
`features_only` models is to prune the model to the layers it reads; ours is the same, at build:

* a model that runs one block per layer (PlainViT, NaiveRecursiveViT) is cut as timm cuts a `VisionTransformer`
  (`prune`): its depth becomes the last layer read + 1;
* a recursive method keeps its depth (its routers and rankers are sized by it) and owns only what a step of its
  kept training schedule reaches (`kept_layers`; the schedule ends at the last application of the last layer
  read): trailing blocks no kept step runs (Edge-RecViT's tail, MoR-ViT's last block, SR-ViT's later units), and
  the method's own modules that would be used only after that (`ViTBackbone.drop_unreached`: SR-ViT's later step
  transforms and the router of a unit whose mixture is never formed, MoR-ViT's routers of recursions never
  started); reViT's one block runs at every step, so only the final norm can go;
* the final norm, applied to the last layer's map only, is pruned too (timm's `prune_norm`).

The forward's outputs and gradients are those of the unpruned model (`tests/models/test_pruning.py`). A checkpoint
of the full model loads into the pruned one: the keys of the pruned modules (`pruned_keys`) are dropped with one
log line naming them (`load_rules.py`), where any other unexpected key is still an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from .schedule import reach


def prune(model: Any, take: Sequence[int], prune_norm: bool) -> list[int]:
    """timm's `prune_intermediate_layers` for a `ViTBackbone` (its docstring): the layers after the last of `take`
    (checked layers, sorted) cut where the model runs one block per layer (`prunable`), else refused."""
    take = list(take)
    depth = take[-1] + 1
    if depth < model.kept_layers:
        if not model.prunable:
            raise ValueError(
                f'{type(model).__name__} cannot be cut to its first {depth} of {model.depth} layers: later layers '
                'are part of what earlier ones compute; use forward_intermediates(indices=...)'
            )
        del model.blocks[max(model.layer_blocks[:depth]) + 1 :]
        model._depth, model.layer_blocks = depth, model.layer_blocks[:depth]
        model.drop_path_rates = model.drop_path_rates[:depth]
        model.out_indices = tuple(take)
        model._schedules.clear()  # its steps hold the blocks cut (a forward's statistics keep theirs)
    if prune_norm:
        model.norm = nn.Identity()
    return list(take)


def prune_unread(model: Any) -> None:
    """At the end of construction: a 'featmap' backbone whose `out_indices` stop before its last layer loses what its
    training forward never reaches (the module docstring); `pruned_keys` records the state-dict keys removed."""
    last, depth = max(model.out_indices), model.depth
    if model.out_type != 'featmap' or last == depth - 1:
        return
    before, out_indices = set(model.state_dict()), model.out_indices
    if model.prunable:
        prune(model, sorted(set(out_indices)), prune_norm=True)
        model.out_indices = out_indices  # in the caller's order (timm's cut sorts them)
    else:
        pairs = list(model.step_layers(None))  # the training schedule (its own setting: every step)
        steps = pairs[: reach([layer for _, layer in pairs], last)]
        used = {model.layer_blocks[layer] for _, layer in steps}
        keep = max(used) + 1  # the blocks nobody reaches are trailing: every method orders its blocks by first use
        if isinstance(model.blocks, nn.ModuleList) and keep < len(model.blocks):
            del model.blocks[keep:]
        model.drop_unreached(steps)
        if any(not k.startswith('norm.') for k in before - set(model.state_dict())):  # reViT's block runs on
            model._kept_layers = last + 1
        model.norm = nn.Identity()
        model._schedules.clear()
    model.pruned_keys = frozenset(before - set(model.state_dict()))
    model.pruned_after = f'out_indices {tuple(out_indices)} end at layer {last} of {depth}'


def pruned_roots(keys: Sequence[str]) -> list[str]:
    """State-dict keys -> their modules, two levels deep ('blocks.9', 'routers.3', 'norm'), sorted."""
    return sorted({'.'.join(k.split('.')[:-1][:2]) or k for k in keys})
