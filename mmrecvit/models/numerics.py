"""Finiteness guards for router logits and auxiliary losses.

A NaN or inf in a router's logits (SR-ViT's soft routers, reViT's depth router, Edge-RecViT's
ranker, MoR-ViT's routers) or in an auxiliary loss does not crash anything by itself: softmax,
top-k and argmax accept it, and the NaN reaches the task loss and, through one optimizer step,
every parameter. Training then continues on garbage. The backbones therefore pass each router
output and each auxiliary loss through `FiniteGuard`, which

* records a finiteness flag per tensor (per row when the rows are steps, e.g. reViT's gate table)
  and resolves all flags of one forward with **one** device sync at its end, so a GPU forward is
  not stalled once per router;
* in mode 'raise' (the default) returns the tensor with NaN/inf replaced by 0 (`nan_to_num`: the
  identity, values and gradients, on finite tensors) so that the forward runs to its end without
  failing on NaN, and there raises `NonFiniteError` naming the backbone, the module and the step
  of every non-finite tensor;
* in mode 'warn' skips a non-finite tensor: it is replaced by zeros *cut from the graph* (a zero
  logit is a neutral score, a zero loss term adds nothing), because a zero gradient flowing back
  through a NaN router weight is still NaN (0 * NaN). The graph keeps its shape: a skipped router
  output stays attached to the router's parameters by a zero with zero gradient (`zero_touch`),
  so no parameter drops out of the backward pass (DDP would fail or hang waiting for its gradient
  on that rank); the end of the forward logs the same text as a
  warning on the 'mmrecvit' logger (forwarded to the mmengine log) and training goes on. Deciding
  to cut needs the flag at once, so 'warn' costs one device sync per check ('raise' one per
  forward).

Checks run on the public forward path (`forward` / `forward_intermediates`): the backbone's forward makes one
guard per forward and makes it the context's (`active_guard`), and the methods pass each router output through
`finite`. While `torch.jit` traces (FLOP counting) or torch.compile/export traces nothing is checked, as the flag
would become a traced constant (`finite` then only sanitises). A caller names where the forward
runs (`forward_label`, a context variable: the training hook sets 'training iteration 17'), and the error
says it.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Sequence

import torch
from torch import Tensor, nn

logger = logging.getLogger('mmrecvit')

NONFINITE_MODES = ('raise', 'warn')
# Where the forwards of this context run ('training iteration 17'), appended to a NonFiniteError or warning.
forward_label: contextvars.ContextVar[str | None] = contextvars.ContextVar('mmrecvit_forward_label', default=None)
# The checks of the backbone forward running in this context (`ViTBackbone.forward_states` sets it; None: none).
active_guard: contextvars.ContextVar[FiniteGuard | None] = contextvars.ContextVar('mmrecvit_guard', default=None)


class NonFiniteError(FloatingPointError):
    """Router logits or an auxiliary loss of a backbone contain NaN or inf."""


class FiniteGuard:
    """The finiteness checks of one forward of backbone `owner` (see the module docstring).

    Args:
        owner: the backbone's name, first word of every message.
        mode: 'raise' or 'warn'.
    """

    def __init__(self, owner: str, mode: str) -> None:
        self.owner, self.mode = owner, mode
        self._checks: list[tuple[str, str | Sequence[str], Tensor]] = []

    def __call__(self, name: str, where: str | Sequence[str], value: Tensor, source: nn.Module | None = None) -> Tensor:
        """Record `value`'s finiteness and return it with NaN/inf replaced by 0.

        name: what the tensor is, e.g. 'routers.2 logits' or 'auxiliary loss loss_du'.
        where: the step it belongs to ('unit 1, recursion 3'); or one label per row of `value`
            (its first dimension), when the rows are steps.
        source: the module that computed `value` (a router). In 'warn' mode a skipped tensor stays
            connected to its parameters through `zero_touch`, so they keep a (zero) gradient:
            DDP with `find_unused_parameters=False` then finds every parameter used on every rank.
        """
        finite = torch.isfinite(value.detach())
        flags = finite.reshape(len(where), -1).all(1) if not isinstance(where, str) else finite.all()
        self._checks.append((name, where, flags))
        if self.mode == 'warn':
            if bool(flags.all()):
                return value
            skipped = sanitize(value.detach())
            return skipped if source is None else skipped + zero_touch(source)
        return value.nan_to_num(0.0, 0.0, 0.0)  # `sanitize`, inline: once per router call

    def finish(self) -> None:
        """Resolve the forward's checks (one sync); raise or warn when any failed."""
        checks, self._checks = self._checks, []
        if not checks or bool(torch.stack([flags.all() for _, _, flags in checks]).all()):
            return
        bad = []
        for name, where, flags in checks:
            if isinstance(where, str):
                if not bool(flags):
                    bad.append(f'{name} at {where}')
            else:
                rows = [label for label, ok in zip(where, flags.tolist()) if not ok]
                if rows:
                    bad.append(f'{name} at {", ".join(rows)}')
        message = f'{self.owner}: non-finite values (NaN or inf) in ' + '; '.join(bad)
        where = forward_label.get()
        at = '' if where is None else f'; at {where}'
        if self.mode == 'raise':
            raise NonFiniteError(
                message + " (the backbone's nonfinite='warn' would replace them by 0 with a warning and go on)" + at
            )
        logger.warning(message + " (nonfinite='warn': replaced by 0 in this forward)" + at)


def finite(name: str, where: str | Sequence[str], value: Tensor, source: nn.Module | None = None) -> Tensor:
    """Router logits (or another tensor that must stay finite) -> the tensor to use, checked by the running forward's
    guard (`FiniteGuard.__call__`): NaN/inf are replaced by 0 and reported at the end of the forward, naming `name`
    and `where`. Outside a checked forward (tracing, or a module called on its own) only sanitised."""
    guard = active_guard.get()
    return sanitize(value) if guard is None else guard(name, where, value, source)


def tracing() -> bool:
    """True while torch.jit traces, torch.compile/dynamo compiles or torch.export exports the forward:
    data-dependent Python decisions (the finiteness checks' flags, statistics read to the host) would
    become constants or graph breaks there, so those parts step aside (the eager forward keeps them)."""
    return torch.jit.is_tracing() or torch.compiler.is_compiling()


def zero_touch(module: nn.Module) -> Tensor:
    """A scalar 0 that depends on every trainable parameter of `module` with a finite (zero)
    gradient, even for NaN/inf parameters (their non-finite entries are masked before the sum)."""
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        return torch.zeros(())
    return sum(torch.where(torch.isfinite(p), p, 0.0).sum() for p in params) * 0.0


def sanitize(value: Tensor) -> Tensor:
    """NaN and +-inf -> 0; the identity (values and gradients) on finite tensors."""
    return value.nan_to_num(0.0, 0.0, 0.0)


def full_precision(module: nn.Module, x: Tensor) -> Tensor:
    """`module(x)` with autocast off, in the module's parameter dtype (fp32 unless the whole model was cast).
    Routers and rankers decide discrete things (top-k, argmax): with bf16/fp16 logits ties become common (4096
    bf16 logits take ~1400 distinct values) and are broken differently by different kernels, so these run in
    full precision under autocast."""
    dtype = next(module.parameters()).dtype
    with torch.autocast(x.device.type, enabled=False):
        return module(x.to(dtype))
