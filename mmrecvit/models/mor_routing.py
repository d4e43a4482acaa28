"""MoR-ViT's routing (docs/methods/mor_vit.md), one forward's state each: expert choice (per-recursion routers
keep the top `ceil(cap_r * Np)` of the tokens chosen at r-1, CLS always) and token choice (one router gives each
token its number of recursions up front). `select(r, x, k)` gives the tokens that run recursion r and their gates:
a `TokenSubset` (`token_adaptive.run_subset`), or with static shapes a (B, N) mask (`masked`: token choice in
training, `MaskedTokenChoice`, for `token_adaptive.run_masked`); `finish()` the routers' losses and statistics. Built
complete where the forward makes them (`MoRViT.iter_layers`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .numerics import finite, full_precision
from .token_adaptive import DepthSubsets, TokenSubset, top_k


class ExpertChoice:
    """One forward's expert-choice routing state (docs/methods/mor_vit.md): hierarchical top-k per recursion.
    `candidates` (B, k) holds the patch positions chosen at the previous recursion (all before recursion 0), sorted."""

    masked = False  # `select` gives a `TokenSubset` (`token_adaptive.run_subset`)

    def __init__(self, model: Any, x: Tensor) -> None:
        B, N, _ = x.shape
        P = model.num_prefix_tokens
        self.model, self.B, self.N, self.P, self.num_patches = model, B, N, P, N - P
        self.prefix = torch.arange(P, device=x.device).expand(B, P)
        self.candidates = torch.arange(P, N, device=x.device).expand(B, N - P)
        self.recursions = torch.zeros(B, N - P, dtype=torch.long, device=x.device)  # recursions run, patch tokens
        self.bce: list[Tensor] = []
        self.chosen: list[int] = []
        self.gate_means: list[Tensor] = []
        self.everything: TokenSubset | None = None  # the all-tokens subset, made once per forward

    def select(self, r: int, x: Tensor, k: int) -> tuple[TokenSubset, Tensor]:
        """The `k` patch tokens (and CLS) that run recursion r, and their gates (in the subset's row order)."""
        B, N, P, D = self.B, self.N, self.P, x.shape[-1]
        k_prev = self.candidates.shape[1]
        if k_prev == self.num_patches:  # all tokens are candidates: score x directly (no gather)
            h = x
        else:
            h = TokenSubset.from_positions(torch.cat([self.prefix, self.candidates], 1), N).gather(x)
            h = h.view(B, P + k_prev, D)  # (B*(P+k), D) -> (B, P+k, D)
        router = self.model.routers[r]
        logits = full_precision(router, h).squeeze(-1)  # (B, P + k_prev), CLS first
        logits = finite(f'routers.{r} logits', f'recursion {r} (token selection)', logits, router)
        patch_logits = logits[:, P:]
        if k < k_prev:
            top = top_k(patch_logits, k).sort(1).values  # (B, k), in token order
            chosen, chosen_logits = self.candidates.gather(1, top), patch_logits.gather(1, top)
        else:
            top, chosen, chosen_logits = None, self.candidates, patch_logits
        if self.model.training:  # the auxiliary loss is a training term (as reViT's): no work at inference
            target = torch.ones_like(patch_logits, dtype=torch.float32)
            if top is not None:
                target = torch.zeros_like(target).scatter_(1, top, 1.0)
            self.bce.append(F.binary_cross_entropy_with_logits(patch_logits.float(), target))
        self.candidates = chosen
        self.chosen.append(k)
        if k == self.num_patches:  # every token, in order: no index or concatenation needed
            self.recursions.fill_(r + 1)
            gate = self.model.alpha * torch.sigmoid(logits)  # (B, N)
            self.gate_means.append(gate.detach().float().mean())
            if self.everything is None:
                self.everything = TokenSubset.everything(B, N, x.device)
            return self.everything, gate.reshape(-1).to(x.dtype)
        self.recursions.scatter_(1, chosen - P, r + 1)  # nested sets: the last write is the deepest
        gate = self.model.alpha * torch.sigmoid(torch.cat([logits[:, :P], chosen_logits], 1))  # (B, P + k)
        self.gate_means.append(gate.detach().float().mean())
        return TokenSubset.from_positions(torch.cat([self.prefix, chosen], 1), N), gate.reshape(-1).to(x.dtype)

    def finish(self) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        losses, scalars = {}, {}
        if self.bce:
            losses['loss_router_bce'] = self.model.bce_loss_weight * torch.stack(self.bce).mean()
        if self.gate_means:
            scalars['gate/mean'] = torch.stack(self.gate_means).mean()
        # The chosen sets are nested: recursion r ran the tokens that reached more than r recursions.
        scalars.update({f'sel/r{r}': (self.recursions > r).float().mean() for r in range(len(self.chosen))})
        scalars['recursions/mean'] = self.recursions.float().mean()
        return losses, scalars


class TokenRoute(NamedTuple):
    """Token choice's decision for one forward (`token_choice`): router logits (B, N, N_r) and probabilities of the
    patch tokens (B, Np, N_r), recursions per patch token (B, Np) in 1..N_r, per-token gates (B*N,) and the
    recursions of every token `token_recursions` (B, N), CLS running every one."""

    logits: Tensor
    probs: Tensor
    recursions: Tensor
    gate: Tensor
    token_recursions: Tensor


def token_choice(model: Any, x: Tensor) -> TokenRoute:
    """Token choice's router on the states entering recursion 0: each token's number of recursions
    (docs/methods/mor_vit.md)."""
    P, R, B = model.num_prefix_tokens, model.num_recursions, x.shape[0]
    logits = finite(
        'router logits', 'the depth assignment (before recursion 0)', full_precision(model.router, x), model.router
    )  # (B, N, N_r)
    probs = logits.softmax(-1)
    recursions = logits[:, P:].detach().argmax(-1) + 1  # (B, Np) in 1..N_r
    token_recursions = torch.cat([recursions.new_full((B, P), R), recursions], 1)  # CLS: every one
    gate = (model.alpha * probs.gather(-1, (token_recursions - 1).unsqueeze(-1))).reshape(-1).to(x.dtype)  # (B*N,)
    return TokenRoute(logits, probs[:, P:], recursions, gate, token_recursions)


class TokenChoice:
    """One forward's token-choice routing (docs/methods/mor_vit.md): the decision `route` and the token subsets of every
    recursion (`DepthSubsets` of its depths, made by the caller: a host read of the counts; eval)."""

    masked = False  # `select` gives a `TokenSubset` (`token_adaptive.run_subset`)

    def __init__(self, model: Any, route: TokenRoute, subsets: DepthSubsets | None) -> None:
        self.model, self.route, self.subsets = model, route, subsets
        self.recursions = route.recursions

    @torch.compiler.disable
    def select(self, r: int, x: Tensor, k: int | None = None) -> tuple[TokenSubset, Tensor]:
        active = self.subsets.active(r)
        return active, self.route.gate.index_select(0, active.index)

    def finish(self) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """The routers' losses and statistics (from `route` alone: the same on the masked path)."""
        model, R, route = self.model, self.model.num_recursions, self.route
        patch_logits, recursions = route.logits[:, model.num_prefix_tokens :], route.recursions
        P_i = route.probs.float().mean((0, 1))  # mean router probability of i recursions
        f_i = F.one_hot(recursions - 1, R).float().mean((0, 1))  # fraction of tokens given i recursions
        losses = {
            'loss_balance': model.balance_loss_weight * R * (P_i * f_i).sum(),
            'loss_z': model.z_loss_weight * torch.logsumexp(patch_logits.float(), -1).square().mean(),
        }
        scalars = {f'sel/r{r}': (recursions > r).float().mean() for r in range(R)}
        scalars['recursions/mean'] = recursions.float().mean()
        scalars['gate/mean'] = route.gate.detach().float().mean()
        return losses, scalars


class MaskedTokenChoice(TokenChoice):
    """Token choice with static shapes, no host read (training, docs/methods/mor_vit.md): `select` gives the (B, N)
    mask of the tokens that run recursion r (None at r = 0: every token runs at least one) and every token's gate
    (B, N), for `token_adaptive.run_masked`. Not kept out of a compiled graph: nothing in it depends on r's data."""

    masked = True

    def __init__(self, model: Any, route: TokenRoute) -> None:
        super().__init__(model, route, None)

    def select(self, r: int, x: Tensor, k: int | None = None) -> tuple[Tensor | None, Tensor]:
        depth = self.route.token_recursions  # (B, N)
        return (None if r == 0 else depth > r), self.route.gate.view(depth.shape)
