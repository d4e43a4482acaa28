"""The token-adaptive engine (mmrecvit/models/token_adaptive.py) against dense references."""

import pytest
import torch
from backbone_cases import masked_attention

from mmrecvit.models.layers import Block
from mmrecvit.models.token_adaptive import (
    UPDATES,
    DepthSubsets,
    KVCache,
    TokenSubset,
    run_masked,
    run_subset,
    subset_work,
)
from mmrecvit.models.windows import Global, Windows

D, H = 32, 2


def make_block(seed=0):
    torch.manual_seed(seed)
    return Block(D, H).eval()


def varied_mask(B=4, N=11, seed=1):
    """Different active counts per image: one full image, one with a single token, one empty."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(B, N, generator=g) < 0.5
    mask[0] = True
    mask[1] = False
    mask[1, 3] = True
    if B > 3:
        mask[3] = False
    return mask


def dense_masked_attention_block(block, x, mask):
    """Reference for attention among the active tokens: the dense block with a key mask."""
    allowed = mask[:, None, None, :].expand(-1, 1, x.shape[1], -1)  # (B, 1, Nq, Nk)
    h = x + masked_attention(block, x, allowed)
    h = h + block.mlp(block.norm2(h))
    return torch.where(mask[..., None], h, x)


def frozen_cache(block, x, mask):
    """A cache of the tokens not in `mask` (in images with a token in it): the frozen ones of step 1 of depths 1/2."""
    cache = KVCache()
    cache.update(block, x, DepthSubsets(mask.long() + 1, 2), 1)
    return cache


def test_token_subset_constructors_agree():
    mask = varied_mask()
    sub = TokenSubset.from_mask(mask)
    assert sub.counts == tuple(mask.sum(1).tolist()) and sub.total == int(mask.sum())
    assert torch.equal(sub.mask(), mask)
    assert torch.equal(sub.image_of_rows(), mask.nonzero()[:, 0])
    pos = torch.tensor([[0, 5], [2, 1]])
    sub = TokenSubset.from_positions(pos, 7)
    assert sub.counts == (2, 2) and sub.index.tolist() == [0, 5, 9, 8]
    x = torch.randn(2, 7, 3)
    assert torch.equal(sub.gather(x), torch.stack([x[0, 0], x[0, 5], x[1, 2], x[1, 1]]))
    y = sub.scatter(x, torch.zeros(4, 3))
    assert y[0, 5].abs().sum() == 0 and torch.equal(y[0, 1], x[0, 1])
    assert TokenSubset.everything(2, 7).is_full


def test_subset_with_cached_keys_equals_dense_block_rows():
    """Keys/values over all tokens (docs/methods/edge_recvit.md): active rows equal the dense block, frozen rows
    keep."""
    block, mask = make_block(), varied_mask()
    x = torch.randn(*mask.shape, D)
    with torch.no_grad():
        active = TokenSubset.from_mask(mask)
        out = run_subset(block, x, active, kv_cache=frozen_cache(block, x, mask))
        work = subset_work(block, active, True)
        ref = torch.where(mask[..., None], block(x), x)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-6)
    counts = mask.sum(1).tolist()
    N = mask.shape[1]
    assert work.queries == pytest.approx(sum(counts) / 4)
    assert work.keys == pytest.approx(sum(N for c in counts if c) / 4)  # images without queries do not attend
    assert work.attn_pairs == pytest.approx(sum(c * N for c in counts) / 4)
    assert work.mlp_hidden == 4 * D


def test_subset_attention_among_active_tokens_equals_masked_dense():
    """kv_cache=None (docs/methods/mor_vit.md, MoR): attention among the active tokens only."""
    block, mask = make_block(), varied_mask()
    x = torch.randn(*mask.shape, D)
    with torch.no_grad():
        active = TokenSubset.from_mask(mask)
        out = run_subset(block, x, active)
        work = subset_work(block, active, False)
        ref = dense_masked_attention_block(block, x, mask)
        # and image by image: the block on just that image's active tokens
        for b in range(mask.shape[0]):
            if mask[b].any():
                alone = block(x[b, mask[b]][None])[0]
                torch.testing.assert_close(out[b, mask[b]], alone, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-6)
    counts = mask.sum(1).tolist()
    assert work.keys == pytest.approx(sum(counts) / 4)
    assert work.attn_pairs == pytest.approx(sum(c * c for c in counts) / 4)


def test_residual_gate_per_token():
    block, mask = make_block(), varied_mask()
    x = torch.randn(*mask.shape, D)
    sub = TokenSubset.from_mask(mask)
    gate = torch.rand(sub.total)
    with torch.no_grad():
        out = run_subset(block, x, sub, residual_gate=gate)
        full = dense_masked_attention_block(block, x, mask)
    g = torch.zeros(mask.shape).index_put_((mask.nonzero()[:, 0], mask.nonzero()[:, 1]), gate)[..., None]
    torch.testing.assert_close(out, x + g * (full - x), atol=1e-6, rtol=1e-6)
    # the gate on the all-active (dense) path too
    everything = TokenSubset.everything(*mask.shape)
    gate = torch.rand(everything.total)
    with torch.no_grad():
        out = run_subset(block, x, everything, residual_gate=gate)
        torch.testing.assert_close(out, x + gate.view(*mask.shape, 1) * (block(x) - x), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize('cached', [True, False])
def test_varying_active_counts_equal_one_image_at_a_time(cached):
    """The per-image attention (different counts) and the batched one (equal counts) are exact."""
    block = make_block()
    N = 13
    x = torch.randn(3, N, D)
    depth = torch.tensor([[3] * 9 + [1] * 4, [3] * 4 + [1] * 9, [3] * 9 + [1] * 4])[:, torch.randperm(N)]
    mask = depth > 1
    with torch.no_grad():
        batched = run_subset(
            block, x, TokenSubset.from_mask(mask), kv_cache=frozen_cache(block, x, mask) if cached else None
        )
        for b in range(3):
            one = run_subset(
                block,
                x[b : b + 1],
                TokenSubset.from_mask(mask[b : b + 1]),
                kv_cache=frozen_cache(block, x[b : b + 1], mask[b : b + 1]) if cached else None,
            )
            torch.testing.assert_close(batched[b], one[0], atol=1e-6, rtol=1e-6)
        # images 0 and 2 have equal counts: the batched SDPA path
        pair = [0, 2]
        both = run_subset(
            block,
            x[pair],
            TokenSubset.from_mask(mask[pair]),
            kv_cache=frozen_cache(block, x[pair], mask[pair]) if cached else None,
        )
    torch.testing.assert_close(both, batched[pair], atol=1e-6, rtol=1e-6)


def test_depth_plan_subsets():
    depth = torch.tensor([[4, 1, 2, 4, 3, 1], [1, 1, 2, 1, 1, 1]])
    plan = DepthSubsets(depth, 4)
    for s in range(4):
        attending = (depth > s).any(1, keepdim=True)
        assert torch.equal(plan.active(s).mask(), depth > s)
        assert torch.equal(plan.frozen(s).mask(), (depth <= s) & attending)
        assert torch.equal(plan.exited(s).mask(), (depth == s) & attending)
    assert plan.alive == [[6, 6], [4, 1], [3, 0], [2, 0]]


def test_kv_cache_projects_each_frozen_token_once_per_weight_set():
    """A head / shared x3 / tail schedule equals the masked dense reference, and frozen keys/values
    are projected once for the shared block and once for the tail, reused in between."""
    torch.manual_seed(0)
    head, shared, tail = Block(D, H).eval(), Block(D, H).eval(), Block(D, H).eval()
    schedule = [head, shared, shared, shared, tail]
    L, B, N = len(schedule), 3, 12
    depth = torch.randint(1, L + 1, (B, N))
    depth[:, 0] = L  # one token at full depth per image (like CLS)
    x0 = torch.randn(B, N, D)
    plan, cache, x, ref = DepthSubsets(depth, L), KVCache(), x0, x0
    with torch.no_grad():
        for s, block in enumerate(schedule):
            new = cache.update(block, x, plan, s)
            assert new.total == int(((depth <= s) & ((depth == s) | (s in (1, L - 1)))).sum())
            x = run_subset(block, x, plan.active(s), kv_cache=cache)
            ref = ref + (depth > s)[..., None] * (block(ref) - ref)
            torch.testing.assert_close(x, ref, atol=1e-5, rtol=1e-5)
        # the cache holds the tail's keys/values of the final frozen states
        frozen = plan.frozen(L - 1)
        torch.testing.assert_close(
            frozen.gather(cache.kv.view(B, N, 2 * D)), tail.project_kv(frozen.gather(x)), atol=1e-6, rtol=1e-6
        )
    shared_exits = int(((depth >= 1) & (depth <= L - 2)).sum())  # frozen during the shared steps
    tail_frozen = int((depth <= L - 1).sum())
    assert cache.projected == shared_exits + tail_frozen
    # token-steps served from the cache: frozen at shared steps 2..L-2 minus the new exits there
    served = sum(int((depth <= s).sum()) for s in range(2, L - 1)) - int(((depth >= 2) & (depth <= L - 2)).sum())
    assert cache.reused == served > 0


@pytest.mark.parametrize('cached', [True, False])
def test_gradients_match_the_masked_reference(cached):
    """Differentiable (MoR trains through the engine): grads of x, gate and weights as the reference."""
    mask = varied_mask()
    x = torch.randn(*mask.shape, D)
    sub = TokenSubset.from_mask(mask)
    grads = []
    for engine in (True, False):
        block = make_block().train()
        xi = x.clone().requires_grad_(True)
        gate = torch.linspace(0.1, 1.0, sub.total).requires_grad_(True)
        if engine:
            out = run_subset(
                block, xi, sub, kv_cache=frozen_cache(block, xi, mask) if cached else None, residual_gate=gate
            )
        else:
            full = block(xi) if cached else dense_masked_attention_block(block, xi, mask)
            g = torch.zeros(mask.shape).index_put((mask.nonzero()[:, 0], mask.nonzero()[:, 1]), gate)[..., None]
            out = xi + g * (full - xi)
        (out * torch.cos(out)).sum().backward()
        grads.append([xi.grad, gate.grad] + [p.grad for p in block.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


# layout, relative position tables: on a 3 x 4 grid with CLS (N = 13), windows of 2
LAYOUTS = {
    'global': (None, None),
    'global-relpos': (Global((3, 4), 1), (3, 4)),
    'windows-relpos': (Windows((3, 4), 2, 1), (2, 2)),
}


@pytest.mark.parametrize('update', UPDATES)
@pytest.mark.parametrize('layout', list(LAYOUTS))
def test_masked_run_equals_the_subset_run_and_its_gradients(layout, update):
    """`run_masked` (static shapes: MoR-ViT's token choice in training) computes `run_subset`'s function: outputs and
    the gradients of x, the gates and every weight, drop path drawn alike, with images of every token, one token
    and none."""
    layout, tables = LAYOUTS[layout]
    mask = varied_mask(N=13)
    x, gate = torch.randn(*mask.shape, D), torch.rand(mask.shape)
    results = []
    for masked in (True, False):
        block = make_block()
        if tables:
            torch.manual_seed(0)
            block = Block(D, H, rel_pos_size=tables)
            with torch.no_grad():
                block.attn.rel_pos_h.normal_(), block.attn.rel_pos_w.normal_()
        xi, gi = x.clone().requires_grad_(True), gate.clone().requires_grad_(True)
        kw = dict(update=update, drop_path_rate=0.3, layout=layout)
        torch.manual_seed(1)
        if masked:
            out = run_masked(block.train(), xi, mask, residual_gate=gi, **kw)
        else:
            sub = TokenSubset.from_mask(mask)
            out = run_subset(block.train(), xi, sub, residual_gate=gi.reshape(-1)[sub.index], **kw)
        (out * torch.cos(out)).sum().backward()
        results.append([out, xi.grad, gi.grad, *(p.grad for p in block.parameters())])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_drop_path_is_drawn_per_image():
    torch.manual_seed(3)
    block = make_block().train()
    B, N = 16, 9
    mask = torch.rand(B, N) < 0.6
    mask[:, 0] = True
    x = torch.randn(B, N, D)
    with torch.no_grad():
        out = run_subset(block, x, TokenSubset.from_mask(mask), drop_path_rate=0.7)
    unchanged = (out == x).all(-1)  # (B, N): both residual branches dropped
    assert torch.equal(unchanged | mask, torch.ones_like(mask))  # inactive tokens untouched
    per_image = [bool(unchanged[b, mask[b]].all()) for b in range(B)]
    assert all(bool(unchanged[b, mask[b]].any()) == per_image[b] for b in range(B))  # all or none
    assert any(per_image) and not all(per_image)


def test_inplace_equals_out_of_place_and_refuses_autograd():
    block, mask = make_block(), varied_mask()
    x = torch.randn(*mask.shape, D)
    sub = TokenSubset.from_mask(mask)
    with torch.no_grad():
        ref = run_subset(block, x, sub, kv_cache=frozen_cache(block, x, mask))
        y = x.clone()
        out = run_subset(block, y, sub, kv_cache=frozen_cache(block, y, mask), inplace=True)
    assert out.data_ptr() == y.data_ptr()
    torch.testing.assert_close(out, ref, atol=0, rtol=0)
    with pytest.raises(RuntimeError, match='only for inference'):
        run_subset(block, x.clone().requires_grad_(True), sub, inplace=True)


def test_cache_for_another_block_is_an_error():
    block, other, mask = make_block(0), make_block(1), varied_mask()
    x = torch.randn(*mask.shape, D)
    with pytest.raises(RuntimeError, match='kv_cache.update'):
        run_subset(block, x, TokenSubset.from_mask(mask), kv_cache=frozen_cache(other, x, mask))
