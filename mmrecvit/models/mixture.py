"""SR-ViT's readout (SPEC §1): the per-token mixture of a unit's recursions, accumulated while it recurses.

Never more than O(1) states of the T a unit runs (SPEC §1: "never keep T states"); the decision and its
derivation: docs/methods/srvit.md ("O(1) states").
"""

from __future__ import annotations

import torch
from torch import Tensor


class RecursionMixture:
    """One unit's readout, accumulated while recursing: it holds O(1) states, never all T (SPEC §1).

    `add(h_t, z_t)` takes each recursion's state (B, N, D) and router logit (B, N, 1) (None: no router);
    `result()` is the unit output. The soft mixture is an online softmax over recursions with a running max m
    (a constant shift, detached), normaliser s and sum a (m = z_1, s = 1, a = h_1 after the first recursion):

        m' = max(m, z_t),  s' = s e^(m - m') + e^(z_t - m'),  a' = a e^(m - m') + e^(z_t - m') h_t,

    so that a / s = sum_t softmax(z)_t h_t, for logits known up front (unit input) and those only known after
    each recursion (recursion states) alike. readout 'soft': a / s. 'final': the last state. 'hard': the
    state of the per-token argmax recursion (first one on ties) with the straight-through gradient of
    one-hot(argmax) + w - sg(w): `h_argmax + m_sg - sg(m_sg)`, `m_sg = sum_t w_t sg(h_t)`, exactly zero in the
    forward and not computed when the logits need no gradient (eval).
    """

    def __init__(self, readout: str) -> None:
        self.readout = readout
        self.last: Tensor | None = None  # the latest state ('final') / the argmax state ('hard')
        self.max: Tensor | None = None  # running max of the logits (B, N, 1), detached
        self.norm: Tensor | None = None  # s (B, N, 1)
        self.acc: Tensor | None = None  # a (B, N, D)

    def add(self, h: Tensor, logit: Tensor | None) -> None:
        if self.readout == 'final' or logit is None:
            self.last = h
            return
        z = logit.detach()
        new_max = z if self.max is None else torch.maximum(self.max, z)
        if self.readout == 'hard':
            self.last = h if self.max is None else torch.where(z > self.max, h, self.last)
        # 'hard' needs the soft mixture for its router gradient only: skipped without autograd.
        if self.readout == 'soft' or logit.requires_grad:
            value = h if self.readout == 'soft' else h.detach()
            take = torch.exp(logit - new_max)  # (B, N, 1)
            if self.acc is None:
                self.norm, self.acc = take, take * value
            else:
                keep = torch.exp(self.max - new_max)
                self.norm = self.norm * keep + take
                self.acc = self.acc * keep + take * value
        self.max = new_max

    def result(self) -> Tensor:
        if self.acc is None:  # 'final', a unit without router, or 'hard' without autograd
            return self.last
        mixture = self.acc / self.norm
        if self.readout == 'soft':
            return mixture
        return self.last + (mixture - mixture.detach())
