"""SR-ViT's building blocks (docs/methods/srvit.md): the step transform before each recursion, the soft router
that scores a unit's recursions, and the per-token mixture of the recursions, accumulated while the unit recurses
(O(1) states of the T a unit runs, never all T; derivation in docs/methods/srvit.md, "O(1) states").
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .numerics import RouterLinear, fp32_linear


class StepTransform(nn.Module):
    """S_{u,t}(h) = h + Linear(h), D x D with bias, zero-initialised (decision, docs/methods/srvit.md): the identity at
    initialisation, so a DeiT-initialised model repeats DeiT's unit trajectory."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, h: Tensor) -> Tensor:
        return h + self.proj(h)


class StepShift(nn.Module):
    """S_{u,t}(h) = h + b, a learned per-channel shift, zero-initialised: the cheap ablation of the step
    transform (D parameters instead of D^2 + D)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, h: Tensor) -> Tensor:
        return h + self.bias


# The step transform's kinds (ablation, docs/methods/srvit.md): what runs before recursions t >= 2.
STEP_TRANSFORMS = {'linear': StepTransform, 'shift': StepShift, 'none': None}


class SoftRouter(nn.Module):
    """R_u: Linear(D -> T) scoring the T recursions of a unit, zero-initialised (uniform mixture).

    `forward(x)` gives the logits of all recursions from one input (the unit input, docs/methods/srvit.md);
    `recursion_logit(h, t)` scores recursion t from its own state with row t only ('recursion_states').
    """

    def __init__(self, dim: int, num_recursions: int) -> None:
        super().__init__()
        self.proj = RouterLinear(dim, num_recursions)  # fp32 products (`numerics.py`, "Routers decide in fp32")
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x)  # (B, N, D) -> (B, N, T)

    def recursion_logit(self, h: Tensor, t: int) -> Tensor:
        """(B, N, D) -> (B, N, 1) fp32, as `forward` (`numerics.fp32_linear`)."""
        return fp32_linear(h, self.proj.weight[t : t + 1], self.proj.bias[t : t + 1])


class RecursionMixture:
    """One unit's readout, accumulated while recursing: it holds O(1) states, never all T (docs/methods/srvit.md).

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
        self.dtype: torch.dtype | None = None  # the states'

    def add(self, h: Tensor, logit: Tensor | None) -> None:
        self.dtype = h.dtype
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
        """The unit output, in the states' dtype (the fp32 logits make the sums fp32; a bf16 model's next block
        takes bf16)."""
        if self.acc is None:  # 'final', a unit without router, or 'hard' without autograd
            return self.last
        mixture = self.acc / self.norm
        if self.readout == 'soft':
            return mixture.to(self.dtype)
        return self.last + (mixture - mixture.detach()).to(self.dtype)
