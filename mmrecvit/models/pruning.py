"""Pruning: timm's `prune_intermediate_layers` for every method, and the pruning at build of a backbone whose
`out_indices` stop before its last layer (issue 48.4; docs/multi_node.md, `find_unused_parameters`).

A dense backbone's forward stops after the last layer it reads (`ViTBackbone.forward_states`), so the layers after
it, their blocks and the final norm, never receive a gradient. DDP with `find_unused_parameters=False`, every
recipe's, then fails on the second iteration ("Expected to have finished reduction"). timm's answer for its
`features_only` models is to prune the model to the layers it reads; ours is the same (`prune`), for timm's
`features_only` models (`mmrecvit.timm`) and, at build, for every backbone whose `out_indices` stop early:

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


def prune(model: Any, take: Sequence[int], prune_norm: bool, why: str = '') -> list[int]:
    """timm's `prune_intermediate_layers` for a `ViTBackbone` (its docstring): what no layer up to the last of `take`
    (checked layers, sorted) needs goes -- the later layers of a model that runs one block per layer (`prunable`,
    its depth cut as timm cuts a ViT), what no kept step of a recursive method reaches (`cut_unreached`) -- and the
    final norm with `prune_norm`; `pruned_keys` gains the state-dict keys removed, `pruned_after` says why."""
    take, depth = list(take), model.depth
    before = set(model.state_dict())
    if take[-1] + 1 < model.kept_layers:
        if model.prunable:
            cut = take[-1] + 1
            del model.blocks[max(model.layer_blocks[:cut]) + 1 :]
            model._depth, model.layer_blocks = cut, model.layer_blocks[:cut]
            model.drop_path_rates = model.drop_path_rates[:cut]
            model.out_indices = tuple(take)
        else:
            cut_unreached(model, take[-1])
        model._schedules.clear()  # its steps hold the blocks cut (a forward's statistics keep theirs)
    if prune_norm:
        model.norm = nn.Identity()
    removed = before - set(model.state_dict())
    if removed:
        model.pruned_keys = model.pruned_keys | removed
        model.pruned_after = why or f'prune_intermediate_layers: the layers after {take[-1]} of {depth}'
    return take


def cut_unreached(model: Any, last: int) -> None:
    """A recursive method's part of `prune`: the trailing blocks no step up to the last application of layer `last`
    runs in training (its own setting: every step), and the method's own modules only later steps would read
    (`drop_unreached`); the layers after `last` are then not run (`kept_layers`) where something was cut."""
    pairs = list(model.step_layers(None))
    steps = pairs[: reach([layer for _, layer in pairs], last)]
    before = set(model.state_dict())
    keep = max(model.layer_blocks[layer] for _, layer in steps) + 1  # every method orders its blocks by first use
    if isinstance(model.blocks, nn.ModuleList) and keep < len(model.blocks):
        del model.blocks[keep:]
    model.drop_unreached(steps)
    if before != set(model.state_dict()):  # reViT's one block runs at every step: nothing to cut
        model._kept_layers = last + 1


def prune_unread(model: Any) -> None:
    """At the end of construction: a 'featmap' backbone whose `out_indices` stop before its last layer loses what its
    training forward never reaches, the final norm included (the module docstring)."""
    last, depth, out_indices = max(model.out_indices), model.depth, model.out_indices
    if model.out_type != 'featmap' or last == depth - 1:
        return
    why = f'out_indices {tuple(out_indices)} end at layer {last} of {depth}'
    prune(model, sorted(set(out_indices)), prune_norm=True, why=why)
    model.out_indices = out_indices  # in the caller's order (timm's cut sorts them)


def pruned_roots(keys: Sequence[str]) -> list[str]:
    """State-dict keys -> their modules, two levels deep ('blocks.9', 'routers.3', 'norm'), sorted."""
    return sorted({'.'.join(k.split('.')[:-1][:2]) or k for k in keys})
