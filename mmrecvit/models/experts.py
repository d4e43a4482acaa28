"""reViT's building blocks: an FFN bank merged in weight space, and the depth router that programs it
(docs/methods/revit.md).

At step t the FFN is the convex combination of E expert FFNs in weight space, `θ̄_t = Σ_e g_{t,e} θ_e` for each
of W1, b1, W2, b2, with gates `g_t = softmax(ψ(s_t)/τ)` from the depth coordinate `s_t = t/(L-1)`; only the
merged FFN runs. Parameter names follow timm with one leading expert axis: `mlp.fc1.weight` (E, 4D, D),
`mlp.fc1.bias` (E, 4D), `mlp.fc2.*`; the router is `router.fc1`/`router.fc2`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from torch import Tensor, nn
from torch.distributed.fsdp import FSDPModule, register_fsdp_forward_method

from .checkpoint import average_blocks
from .layers import Block
from .numerics import RouterLinear


def depth_coordinates(num_steps: int) -> list[float]:
    """The normalised depth grid `s_t = t/(L-1)`, t = 0..L-1 (docs/methods/revit.md), as Python floats.

    Python division is correctly rounded, so k/(K-1) of a renumbered step and t/(L-1) of the same rational
    coordinate are the same float: equal coordinates share one gate row and one merge.
    """
    return [t / (num_steps - 1) for t in range(num_steps)]


def depth_grid(num_steps: int, device: torch.device | None = None) -> Tensor:
    """`depth_coordinates` made on the device, float32 (K, ): the forwards' grid, with no host-to-device upload (a
    stream sync from pageable memory, issue 48.2). Divided in float64, correctly rounded as Python divides, then
    rounded to float32 as `torch.tensor` rounds Python's floats: the same values bit for bit; K = 1 gives s = 0."""
    steps = torch.arange(num_steps, device=device, dtype=torch.float64)
    return (steps / max(num_steps - 1, 1)).float()


def out_depth_to_step(out_depth: float, num_steps: int) -> int:
    """Step index of the output at normalised depth d for L steps: `max(1, floor(d*L)) - 1` (the deprecated
    `out_depths` of reViT; `out_indices` are layers)."""
    return max(1, math.floor(out_depth * num_steps + 1e-9)) - 1


class MergedFfn(NamedTuple):
    """Merged FFN weights; leading dims are those of the gates that made them (none, or (L,))."""

    fc1_weight: Tensor  # (..., H, D)
    fc1_bias: Tensor  # (..., H)
    fc2_weight: Tensor  # (..., D, H)
    fc2_bias: Tensor  # (..., D)

    def unbind(self, num: int | None = None) -> list[MergedFfn]:
        """Merged FFNs (L, ...) -> L merged FFNs, one per step (autograd: one stack per weight in backward, where
        indexing each step would add L full-size gradients). `num`: L where the caller knows it (fx traces this
        with symbolic shapes, whose unbind it cannot count)."""
        parts = [w.unbind(0) for w in self]
        return [MergedFfn(*(p[t] for p in parts)) for t in range(len(self.fc1_weight) if num is None else num)]


class ExpertLinear(nn.Module):
    """E stacked linear layers, `weight` (E, out, in) and `bias` (E, out); only their mix is run."""

    def __init__(self, num_experts: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_experts, out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(num_experts, out_features))
        trunc_normal_(self.weight, std=0.02)  # each expert as a timm Linear

    def merge(self, gates: Tensor) -> tuple[Tensor, Tensor]:
        """gates (..., E) -> weight (..., out, in), bias (..., out): `Σ_e g_e θ_e`, in the experts' dtype (the router's
        gates are fp32, `numerics.py`)."""
        gates = gates.to(self.weight.dtype)
        # (..., E) @ (E, out*in) -> (..., out*in) -> (..., out, in)
        weight = (gates @ self.weight.flatten(1)).unflatten(-1, self.weight.shape[1:])
        return weight, gates @ self.bias


class ExpertMlp(nn.Module):
    """The expert FFN bank: GELU MLPs with weights `fc1`/`fc2` stacked over E experts."""

    def __init__(self, dim: int, hidden_dim: int, num_experts: int) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.fc1 = ExpertLinear(num_experts, dim, hidden_dim)
        self.act = nn.GELU()
        self.fc2 = ExpertLinear(num_experts, hidden_dim, dim)

    def merge(self, gates: Tensor) -> MergedFfn:
        """gates (..., E) -> the convex combination of the experts' W1, b1, W2, b2 (docs/methods/revit.md)."""
        return MergedFfn(*self.fc1.merge(gates), *self.fc2.merge(gates))

    def merge_macs(self) -> int:
        """Multiply-accumulates of one merge (one gate row): E per FFN parameter."""
        return self.num_experts * sum(p[0].numel() for p in self.parameters())

    def forward(self, x: Tensor, ffn: MergedFfn | None = None, expert_gates: Tensor | None = None) -> Tensor:
        """Run one merged FFN, (B, N, D) -> (B, N, D): `ffn` merged beforehand (eval: cached; training: all steps in
        one product), or merged here from a row of `expert_gates` (E,) (training with `with_cp`: inside the
        checkpointed block call, recomputed in backward). With G merged FFNs (gates (G, E)) the images form G equal
        consecutive groups, group j running FFN j."""
        if ffn is None:
            ffn = self.merge(expert_gates)
        if isinstance(ffn.fc1_weight, torch.fx.Proxy) or ffn.fc1_weight.ndim == 2:  # fx traces no step dropout
            return F.linear(self.act(F.linear(x, ffn.fc1_weight, ffn.fc1_bias)), ffn.fc2_weight, ffn.fc2_bias)
        # G FFNs (G, H, D) for G equal groups of the images (reViT's step dropout): one batched product each.
        h = x.reshape(ffn.fc1_weight.shape[0], -1, x.shape[-1])  # (G g, N, D) -> (G, g N, D)
        h = self.act(GroupedLinear.apply(h, ffn.fc1_weight, ffn.fc1_bias))
        return GroupedLinear.apply(h, ffn.fc2_weight, ffn.fc2_bias).reshape(x.shape)


class GroupedLinear(torch.autograd.Function):
    """`F.linear` of G groups of rows (G, R, in) with G weights (G, out, in) and biases (G, out), as one batched
    product. By hand because `torch.baddbmm(b, x, w.mT)` returns the weights' gradient as a transposed view, which
    the merge's backward then copies whole at every step; this returns it in the weights' layout, as `F.linear`'s
    backward does for one weight (`dW = dY^T X`). Under autocast the product runs in the autocast dtype, as
    `baddbmm` does, and so does its backward; the backward is made of differentiable ops (double backward works)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        out = torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, weight = ctx.saved_tensors
        x, weight = x.to(grad.dtype), weight.to(grad.dtype)  # autocast's dtype (a no-op without autocast)
        return torch.bmm(grad, weight), torch.bmm(grad.transpose(1, 2), x), grad.sum(1)


class ExpertBlock(Block):
    """reViT's shared block: a `Block` whose MLP is the expert bank (`ExpertMlp`), with the two reads of the experts
    made outside a step as its own methods: `merge` (every step's FFN from one product) and `diversity` (the
    loss on the experts' W1). FSDP2 gathers a block's parameters only inside its forwards, so once the block is
    `fully_shard`ed (per block, as for every method) these run as forwards of its unit (`sharded`), where they read
    whole tensors rather than a rank's shard (issue 48.5; docs/multi_node.md, "FSDP2")."""

    FORWARD_METHODS = ('merge', 'diversity')

    def sharded(self) -> ExpertBlock:
        """This block, its `FORWARD_METHODS` registered as FSDP2 forwards once it is an `FSDPModule` (once)."""
        if isinstance(self, FSDPModule) and not all(name in vars(self) for name in self.FORWARD_METHODS):
            for name in self.FORWARD_METHODS:
                register_fsdp_forward_method(self, name)  # sets an instance attribute: registered once
        return self

    def merge(self, gates: Tensor) -> MergedFfn:
        """Gates (..., E) -> the merged FFNs (`ExpertMlp.merge`)."""
        return self.mlp.merge(gates)

    def diversity(self) -> Tensor:
        """The mean pairwise cosine similarity of the experts' flattened W1 (docs/methods/revit.md), a scalar."""
        E = self.mlp.num_experts
        w1 = F.normalize(self.mlp.fc1.weight.flatten(1), dim=1)  # (E, H*D), unit rows
        sim = w1 @ w1.T
        return (sim.sum() - sim.diagonal().sum()) / (E * (E - 1))


class DepthRouter(nn.Module):
    """ψ: depth coordinate s -> E expert logits (Linear 1->hidden, SiLU, Linear hidden->E).

    `fc1` keeps PyTorch's default init (U(-1, 1) for one input, our decision) so its hidden units are distinct
    functions of s in [0, 1]; `fc2` is zero: uniform gates at initialisation (docs/methods/revit.md).
    """

    def __init__(self, num_experts: int, hidden_dim: int = 16) -> None:
        super().__init__()
        self.fc1 = RouterLinear(1, hidden_dim)  # fp32 products (`numerics.py`, "Routers decide in fp32")
        self.act = nn.SiLU()
        self.fc2 = RouterLinear(hidden_dim, num_experts)
        nn.init.zeros_(self.fc2.weight)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, coords: Tensor) -> Tensor:
        """(U,) coordinates -> (U, E) logits."""
        return self.fc2(self.act(self.fc1(coords.unsqueeze(-1))))


def experts_from_blocks(blocks: list[dict[str, Tensor]], num_experts: int) -> dict[str, Tensor]:
    """The expert bank from a plain ViT's n blocks (timm keys without `blocks.i.`): expert e <- the mean FFN of the
    e-th of E contiguous groups of blocks; `fc1.weight`... stacked (E, ...) as `ExpertMlp` holds them."""
    n, E = len(blocks), num_experts
    mlps = [{k: v for k, v in b.items() if k.startswith('mlp.')} for b in blocks]
    experts = [average_blocks(mlps[e * n // E : (e + 1) * n // E]) for e in range(E)]
    names = ('fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias')
    return {name: torch.stack([ffn[f'mlp.{name}'] for ffn in experts]) for name in names}


def programmed_router(
    hidden: int, num_experts: int, num_steps: int, gate: float, dtype: torch.dtype
) -> dict[str, Tensor]:
    """`DepthRouter` weights whose gates program depth like a stack of E groups of blocks: step t of the
    L-step grid puts `gate` on expert floor(t E / L), the rest spread over the others.

    The hidden layer becomes soft steps SiLU(k (s - c_j)) at centres c_j spread over [0, 1] (steep enough to
    switch between neighbouring grid points), and the output layer, linear in its weights, is solved by ridge
    least squares: no training, deterministic.
    """
    E, L = num_experts, num_steps
    centres = torch.linspace(-0.5 / (L - 1), 1 + 0.5 / (L - 1), hidden, dtype=torch.float64)
    steep = 4.0 * (L - 1)
    fc1_weight, fc1_bias = torch.full((hidden, 1), steep, dtype=torch.float64), -steep * centres
    target = torch.full((L, E), (1 - gate) / (E - 1), dtype=torch.float64)
    target[torch.arange(L), torch.arange(L) * E // L] = gate
    coords = torch.tensor(depth_coordinates(L), dtype=torch.float64).unsqueeze(1)
    design = torch.cat([F.silu(coords @ fc1_weight.T + fc1_bias), torch.ones(L, 1, dtype=torch.float64)], 1)
    logits = target.log() - target.log().mean(1, keepdim=True)
    # (design^T design + r I) solution = design^T logits: the minimum-norm fit, kept small by r.
    gram = design.T @ design + 1e-6 * torch.eye(hidden + 1, dtype=torch.float64)
    solution = torch.linalg.solve(gram, design.T @ logits)  # (hidden + 1, E)
    return {
        'router.fc1.weight': fc1_weight.to(dtype),
        'router.fc1.bias': fc1_bias.to(dtype),
        'router.fc2.weight': solution[:-1].T.contiguous().to(dtype),
        'router.fc2.bias': solution[-1].contiguous().to(dtype),
    }
