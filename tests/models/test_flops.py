"""The one analytic FLOP model (mmrecvit/models/flops.py) against mmengine's counter and a hand count."""

import pytest
import torch
from backbone_cases import BACKBONE_CASES, traced_with_stats
from torch.utils.flop_counter import FlopCounterMode

from mmrecvit.models import BACKBONES, EdgeRecViT, MoRViT
from mmrecvit.models.flops import BlockWork, OpWork

pytestmark = pytest.mark.usefixtures('one_thread')

# Static forwards (the same work for every input): every backbone, token-adaptive ones at full depth/capacity.
STATIC = {
    **{name: {} for name in ('PlainViT', 'NaiveRecursiveViT', 'SRViT', 'ReViT')},
    'SRViT (recursion states)': dict(router_input='recursion_states'),
    'EdgeRecViT (masked)': dict(execution='masked'),
    'MoRViT (full capacity)': dict(capacities=[1.0, 1.0, 1.0]),
}


def build_static(case):
    name = case.split(' ')[0]
    return BACKBONES[name](**{**BACKBONE_CASES[name], **STATIC[case]}).eval()


@pytest.mark.parametrize('case', sorted(STATIC))
@pytest.mark.parametrize('warm', [False, True], ids=['first forward', 'later forward'])
def test_analytic_count_equals_mmengine_on_static_backbones(case, warm):
    """mmengine's FlopAnalyzer (1 MAC = 1 FLOP, norms set to 0) x 2 == the backbone's own count of
    the same forward. `warm`: reViT merges its experts only in the first eval forward (then cached)."""
    model = build_static(case)
    x = torch.randn(1, 3, 80, 64)
    if warm:
        with torch.no_grad():
            model(x)
    traced, stats = traced_with_stats(model, x)  # the traced forward's own statistics
    assert traced > 0
    assert stats.flops == pytest.approx(traced, rel=1e-12)


def test_every_kind_of_work_is_reported():
    """Patch embedding always; routers, step transforms, rankers and expert merges by the method that has them."""
    names = {}
    for name in BACKBONES:
        model = BACKBONES[name](**BACKBONE_CASES[name]).train()
        stats = model(torch.randn(2, 3, 64, 64)).stats
        names[name] = {w.name.split('.')[0] for w in stats.work if isinstance(w, OpWork)}
    assert names['PlainViT'] == names['NaiveRecursiveViT'] == {'patch_embed'}
    assert names['SRViT'] == {'patch_embed', 'routers', 'step_transforms'}
    assert names['ReViT'] == {'patch_embed', 'router', 'block'}  # ψ and the merge of the expert bank
    assert names['EdgeRecViT'] == {'patch_embed', 'ranker'}
    assert names['MoRViT'] == {'patch_embed', 'routers'}


def test_hand_count_of_a_token_adaptive_forward():
    """Edge-RecViT with a known depth per token (eval, adaptive execution), counted by hand."""
    D, H, L = 32, 128, 5
    model = EdgeRecViT(**BACKBONE_CASES['EdgeRecViT']).eval()
    assert (model.embed_dim, model.mlp_hidden, model.depth) == (D, H, L)
    # 16 patch tokens (64 x 64 px) + CLS: half the patches stop after 2 steps, half run all 5.
    depth = torch.tensor([[2] * 8 + [5] * 8])
    model.depth_pattern = lambda chosen: depth
    with torch.no_grad():
        stats = model(torch.randn(1, 3, 64, 64)).stats
    N = 17

    def block(q, k, new_kv=0):  # 2 x MACs: qkv + k/v of cached tokens + q.k and attn.v + proj + MLP
        return 2 * (3 * D * D * q + 2 * D * D * new_kv + 2 * q * k * D + D * D * q + 2 * D * H * q)

    expected = (
        2 * 3 * 16 * 16 * D * 16  # patch embedding, 16 patches
        + 2 * 16 * (D * 2 * D + 2 * D * L)  # ranker on the patch tokens
        + 2 * block(N, N)  # steps 0, 1: every token
        + block(9, N, new_kv=8)  # step 2: shared block, 8 tokens enter the cache
        + block(9, N)  # step 3: same block, cached keys reused
        + block(9, N, new_kv=8)
    )  # step 4: the tail, the cache is re-projected
    assert stats.flops == expected
    blocks = stats.blocks
    assert [b.queries for b in blocks] == [17, 17, 9, 9, 9] and [b.new_kv for b in blocks] == [0, 0, 8, 0, 8]


def test_mor_capacity_count_and_routers():
    """MoR-ViT expert choice: every recursion's block on its chosen tokens, attention among them, and
    a router Linear(D -> 1) on the candidates."""
    model = MoRViT(**BACKBONE_CASES['MoRViT'], capacities=[1.0, 0.5, 0.25]).eval()
    with torch.no_grad():
        stats = model(torch.randn(1, 3, 64, 64)).stats
    D, N = 32, 17
    queries = [b.queries for b in stats.blocks]
    assert queries == [N, N, 1 + 8, 1 + 4, N]  # CLS + ceil(cap * 16) patch tokens
    assert all(b.keys == b.queries for b in stats.blocks)
    routers = [w for w in stats.work if isinstance(w, OpWork) and w.name.startswith('routers')]
    assert [w.macs for w in routers] == [N * D, N * D, (1 + 8) * D]  # scored: the previous recursion's tokens
    assert isinstance(stats.work[0], OpWork) and isinstance(stats.work[1], BlockWork)


# ---- the plan counts what each method's forward executed (issue 39 item 1) ------------------------------------
EXECUTED = [(name, {}) for name in sorted(BACKBONES)] + [
    ('SRViT', dict(window_size=2, router_input='recursion_states')),
    ('ReViT', dict(step_drop_rate=0.5)),
    ('EdgeRecViT', dict(execution='masked')),
    ('EdgeRecViT', dict(window_size=2, use_rel_pos=True)),
    ('MoRViT', dict(routing='token_choice')),
    ('MoRViT', dict(unit_size=2, capacities=[1.0, 0.5, 0.25], window_size=2)),
]


@pytest.mark.parametrize('train', [False, True], ids=['eval', 'train'])
@pytest.mark.parametrize('name, kwargs', EXECUTED, ids=[f'{n}-{"-".join(map(str, k.values()))}' for n, k in EXECUTED])
def test_the_plan_counts_what_the_forward_executed(name, kwargs, train):
    """torch's FlopCounterMode on the same forward (every matrix product but the CPU attention kernel, which it does
    not count: our attention term is left out of the comparison) equals the forward's own statistics."""
    if name == 'ReViT':  # the products of its balance and diversity losses are the loss's, not the forward's
        kwargs = {**kwargs, 'balance_loss_weight': 0.0, 'diversity_loss_weight': 0.0}
    torch.manual_seed(0)
    model = BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs}).train(train)
    if name == 'EdgeRecViT':
        with torch.no_grad():
            model.ranker.fc2.weight.mul_(30.0)  # spread depths: tokens exit at different layers
    x = torch.randn(2, 3, 80, 64)
    with torch.no_grad():
        model(x)  # reViT: its eval merges are cached from now on, as in every later forward
        with FlopCounterMode(display=False) as counter:
            stats = model(x).stats
    attention = sum(4 * (w.queries * w.keys if w.attn_pairs is None else w.attn_pairs) * w.dim for w in stats.blocks)
    assert counter.get_total_flops() / 2 == pytest.approx(stats.flops - attention, rel=1e-9)
