"""ViTDet's decomposed relative position biases (mmrecvit/models/rel_pos.py, issue 28.2): parity with detectron2's
ViTDet attention and with a reference written from the formula, on every backbone's global, windowed and
token-subset paths; zero at a DeiT start; counted in the FLOP model; loaded strictly."""

import logging

import pytest
import torch
import torch.nn.functional as F
from backbone_cases import BACKBONE_CASES, distance_to_deit, tiny_backbone, traced_with_stats
from torch.utils._python_dispatch import TorchDispatchMode

from mmrecvit.benchmark import force_mean_depth
from mmrecvit.models import BACKBONES, attention, rel_pos
from mmrecvit.models import token_adaptive as engine
from mmrecvit.models.checkpoint import CheckpointError, is_timm_state_dict, load_state_dict_into
from mmrecvit.models.layers import Attention, Block
from mmrecvit.models.revit_fold import fold_to_plainvit
from mmrecvit.models.windows import Global, Windows

pytestmark = pytest.mark.usefixtures('one_thread')
NAMES = sorted(BACKBONE_CASES)


def randomise_tables(model, seed=0, std=0.5):
    """Non-zero tables (a trained model's), so that the biases change the attention."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'rel_pos' in name:
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    return model


# ---- the reference: ViTDet's formula, pair by pair, on explicit logits ----------------------------------
def resized(table, extent):
    """detectron2's get_rel_pos interpolation: (L, d) -> (2 * extent - 1, d), linear."""
    length = 2 * extent - 1
    if table.shape[0] == length:
        return table
    out = F.interpolate(table.reshape(1, table.shape[0], -1).permute(0, 2, 1), size=length, mode='linear')
    return out.reshape(-1, length).permute(1, 0)


def reference_bias(q, q_tokens, k_tokens, grid, num_prefix, tables, extent):
    """q (H, nq, d) of the tokens `q_tokens` over the keys `k_tokens` (1-d token indices, prefix first) ->
    (H, nq, nk): q . Rh[qh - kh + eh - 1] + q . Rw[qw - kw + ew - 1] for patch-patch pairs, 0 with a prefix token."""
    P, w = num_prefix, grid[1]

    def position(tokens):
        patch = tokens - P
        return patch // w, patch % w, patch >= 0

    qh, qw, q_ok = position(q_tokens)
    kh, kw, k_ok = position(k_tokens)
    (eh, ew), (Rh, Rw) = extent, (resized(tables[0], extent[0]), resized(tables[1], extent[1]))
    dh = (qh[:, None] - kh[None, :] + eh - 1).clamp(0, 2 * eh - 2)  # clamped only for pairs that are masked
    dw = (qw[:, None] - kw[None, :] + ew - 1).clamp(0, 2 * ew - 2)
    bias = torch.einsum('hid,ijd->hij', q, Rh[dh]) + torch.einsum('hid,ijd->hij', q, Rw[dw])
    return bias * (q_ok[:, None] & k_ok[None, :])


def reference_attention(q, k, v, num_heads, bias, allowed):
    """Explicit-logit attention of q (nq, D) over k, v (nk, D): softmax(q k^T / sqrt(d) + bias, masked)."""
    H, d = num_heads, q.shape[-1] // num_heads
    qh, kh, vh = (t.reshape(t.shape[0], H, d).transpose(0, 1) for t in (q, k, v))  # (H, n, d)
    logits = (qh * d**-0.5) @ kh.transpose(1, 2) + bias
    attn = logits.masked_fill(~allowed, float('-inf')).softmax(-1)
    return (attn @ vh).transpose(0, 1).reshape(q.shape[0], H * d)


def window_rule(grid, size, num_prefix):
    """(N, N) bool: patches see their window's patches and the prefix; prefix tokens see everything."""
    h, w = grid
    window = torch.arange(h * w) // w // size * 10_000 + torch.arange(h * w) % w // size
    window = torch.cat([torch.full((num_prefix,), -1), window])
    prefix = window < 0
    return (window[:, None] == window[None, :]) | prefix[None, :] | prefix[:, None]


def reference_dense(q, k, v, grid, num_prefix, num_heads, tables, size=None, key_valid=None):
    """Every token of every image (B, N, D), the window rule when `size` (relative positions over the window,
    so extent s x s) else global (extent = grid), invalid keys masked (a query left with none: all allowed)."""
    B, N, D = q.shape
    tokens = torch.arange(N)
    rule = torch.ones(N, N, dtype=torch.bool) if size is None else window_rule(grid, size, num_prefix)
    extent = grid if size is None else (size, size)
    out = []
    for b in range(B):
        allowed = rule if key_valid is None else rule & key_valid[b][None, :]
        allowed = allowed | (~allowed.any(-1, keepdim=True) & rule)
        qh = q[b].reshape(N, num_heads, -1).transpose(0, 1)
        bias = reference_bias(qh, tokens, tokens, grid, num_prefix, tables, extent) * rule
        out.append(reference_attention(q[b], k[b], v[b], num_heads, bias, allowed))
    return torch.stack(out)


def reference_layout(attn, x, layout, attn_mask=None):
    """`attn(x, attn_mask, layout=layout)` for a dense sequence, from the formula."""
    q, k, v = attn.qkv(x).chunk(3, dim=-1)
    valid = None if attn_mask is None else attn_mask[:, 0, 0, :]
    size = layout.size if isinstance(layout, Windows) else None
    return attn.proj(
        reference_dense(q, k, v, layout.grid, layout.num_prefix, attn.num_heads, attn.rel_pos, size, valid)
    )


def reference_global_attention(q, k, v, layout, num_heads, rel_pos, attn_mask=None):
    valid = None if attn_mask is None else attn_mask[:, 0, 0, :]
    return reference_dense(q, k, v, layout.grid, layout.num_prefix, num_heads, rel_pos, key_valid=valid)


def reference_window_attention(q, k, v, grid, size, num_prefix, num_heads, key_valid=None, rel_pos=None):
    return reference_dense(q, k, v, grid, num_prefix, num_heads, rel_pos, size, key_valid)


def reference_image_attention(
    q, k, v, q_counts, k_counts, num_heads, layout=None, rel_pos=None, q_tokens=None, k_tokens=None
):
    """Image by image, explicit logits with the formula's bias at the rows' token positions."""
    outs, qo, ko = [], 0, 0
    for nq, nk in zip(q_counts, k_counts):
        qt = q_tokens[qo : qo + nq]
        kt = torch.arange(nk) if k_tokens is None else k_tokens[ko : ko + nk]
        qh = q[qo : qo + nq].reshape(nq, num_heads, -1).transpose(0, 1)
        bias = reference_bias(qh, qt, kt, layout.grid, layout.num_prefix, rel_pos, layout.grid)
        allowed = torch.ones(nq, nk, dtype=torch.bool)
        outs.append(reference_attention(q[qo : qo + nq], k[ko : ko + nk], v[ko : ko + nk], num_heads, bias, allowed))
        qo, ko = qo + nq, ko + nk
    return torch.cat(outs)


# ---- parity with detectron2's ViTDet attention ---------------------------------------------------------
def detectron2_attention(table_size, seed=0):
    """detectron2's ViTDet `Attention` with trained-scale tables (std 0.5) and ours holding the same weights."""
    d2_vit = pytest.importorskip('detectron2.modeling.backbone.vit')
    torch.manual_seed(seed)
    ref = randomise_tables(
        d2_vit.Attention(32, num_heads=2, qkv_bias=True, use_rel_pos=True, input_size=table_size).eval(), seed
    )
    ours = Attention(32, 2, rel_pos_size=table_size).eval()
    ours.load_state_dict(ref.state_dict(), strict=True)  # the same names: qkv, proj, rel_pos_h, rel_pos_w
    return ref, ours


@pytest.mark.parametrize(
    'table, grid',
    [((5, 6), (5, 6)), ((7, 7), (5, 6)), ((3, 4), (6, 9))],
    ids=['table = grid', 'tables shrunk', 'tables grown'],
)
def test_global_attention_equals_detectron2_vitdet(table, grid):
    """Our global layout against detectron2's `Attention(use_rel_pos=True)` with the same weights, tables
    resized by its get_rel_pos when the grid differs from their size (non-square grids)."""
    ref, ours = detectron2_attention(table)
    x = torch.randn(2, *grid, 32)
    with torch.no_grad():
        expected = ref(x).reshape(2, -1, 32)
        got = ours(x.reshape(2, -1, 32), layout=Global(grid, 0))
        plain = Attention(32, 2).eval()
        plain.load_state_dict({k: v for k, v in ref.state_dict().items() if 'rel_pos' not in k})
        without = plain(x.reshape(2, -1, 32))
    assert (expected - without).abs().max() > 1e-2, 'the biases must matter for this test to mean anything'
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('table', [(3, 3), (7, 7)], ids=['window-size tables', 'pretrain-grid tables'])
def test_window_attention_equals_detectron2_vitdet(table):
    """Windows of 3 on a 6 x 9 grid against detectron2's window_partition + Attention (its tables resized
    to the window as ours: one table per block at any size)."""
    d2_utils = pytest.importorskip('detectron2.modeling.backbone.utils')
    ref, ours = detectron2_attention(table, seed=1)
    x = torch.randn(2, 6, 9, 32)
    with torch.no_grad():
        windows, pad_hw = d2_utils.window_partition(x, 3)
        expected = d2_utils.window_unpartition(ref(windows), 3, pad_hw, (6, 9)).reshape(2, -1, 32)
        got = ours(x.reshape(2, -1, 32), layout=Windows((6, 9), 3, 0))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('layout', ['global', 'windows'])
@pytest.mark.parametrize('mask', [False, True], ids=['all keys', 'key mask'])
def test_layouts_equal_the_formula_with_prefix_padding_and_masks(layout, mask):
    """A CLS token (no bias, sees everything), a 5 x 3 grid in windows of 2 (padded), a bool key mask."""
    torch.manual_seed(0)
    attn = randomise_tables(Attention(32, 2, rel_pos_size=(4, 4)).eval(), std=1.0)
    grid, P = (5, 3), 1
    x = torch.randn(2, 16, 32)
    valid = torch.rand(2, 16) < 0.6
    valid[:, 0] = True
    attn_mask = valid[:, None, None, :] if mask else None
    fast = Global(grid, P) if layout == 'global' else Windows(grid, 2, P)
    with torch.no_grad():
        torch.testing.assert_close(
            attn(x, attn_mask, layout=fast), reference_layout(attn, x, fast, attn_mask), atol=1e-5, rtol=1e-5
        )


class BiasSized(TorchDispatchMode):
    """Counts the ops that allocate a tensor (not a view, not in place) of at least `size` elements."""

    def __init__(self, size):
        super().__init__()
        self.size, self.count = size, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        fresh = not any(r.alias_info is not None for r in func._schema.returns)
        self.count += fresh and isinstance(out, torch.Tensor) and out.numel() >= self.size
        return out


def dense_bias(form, q, grid, num_prefix, tables):
    """A whole sequence's bias in one of the two forms of `rel_pos.py`."""
    if form == 'grid':
        return rel_pos.grid_bias(q, grid, num_prefix, tables)
    return rel_pos.position_bias(q, torch.arange(q.shape[2])[None], grid, num_prefix, tables)


@pytest.mark.parametrize('num_prefix', [0, 1])
def test_the_grid_form_equals_the_per_query_form_with_its_gradients(num_prefix):
    """`grid_bias` (global steps, windows) against `position_bias` (token subsets) on a whole sequence: the same
    bias and the same gradients for the queries and both tables (up to float rounding: other matmul shapes)."""
    grid, H, d = (6, 5), 2, 8
    q = torch.randn(2, H, num_prefix + 30, d, requires_grad=True)
    tables = tuple(torch.randn(2 * n + 1, d, requires_grad=True) for n in grid)  # resized to 2n - 1
    weight = torch.randn(2, H, num_prefix + 30, num_prefix + 30)
    grid_form, per_query = (dense_bias(form, q, grid, num_prefix, tables) for form in ('grid', 'query'))
    torch.testing.assert_close(grid_form, per_query)
    assert grid_form[..., :num_prefix].abs().sum() == grid_form[:, :, :num_prefix].abs().sum() == 0
    for a, b in zip(*(torch.autograd.grad((bias * weight).sum(), (q, *tables)) for bias in (grid_form, per_query))):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize('form', ['grid', 'query'])
@pytest.mark.parametrize('num_prefix, copies', [(0, (1, 0)), (1, (2, 1))])
def test_the_bias_of_a_grid_is_written_once_and_once_more_for_prefix_keys(form, num_prefix, copies):
    """The (M, heads, nq, nk) bias, the largest tensor of a biased attention besides SDPA's own, is the sum of the
    two axes' terms, written once, and its padding with the prefix tokens' zeros where there are any (the
    per-query form zeroes the prefix queries' terms before the sum); the backward copies the gradient only to
    take that padding off (counted past its incoming gradient, `ones_like`)."""
    grid, H, d = (6, 5), 2, 8
    q = torch.randn(2, H, num_prefix + 30, d, requires_grad=True)
    tables = tuple(torch.randn(2 * n - 1, d, requires_grad=True) for n in grid)
    with BiasSized(2 * H * 30 * 30) as mode:
        bias = dense_bias(form, q, grid, num_prefix, tables)
        forward = mode.count
        bias.backward(torch.ones_like(bias))
    assert bias.shape == (2, H, num_prefix + 30, num_prefix + 30)
    assert (forward, mode.count - forward - 1) == copies


def test_attention_with_tables_needs_a_layout():
    attn = Attention(32, 2, rel_pos_size=(4, 4))
    with pytest.raises(ValueError, match='relative position biases'):
        attn(torch.randn(1, 17, 32))


# ---- every backbone ------------------------------------------------------------------------------------
def build(name, use_rel_pos=True, **kwargs):
    """The tiny backbone with relative position biases; token-adaptive ones on varied active tokens."""
    model = tiny_backbone(name, use_rel_pos=use_rel_pos, **kwargs)
    if name == 'EdgeRecViT':
        force_mean_depth(model, 3.0, 1)
    if name == 'MoRViT' and model.routing == 'expert_choice':
        model.capacities = [1.0, 0.6, 0.3]
    return model


@pytest.mark.parametrize('name', NAMES)
def test_tables_are_per_unique_block_at_the_pretrain_grid(name):
    model = tiny_backbone(name, use_rel_pos=True, img_size=(64, 80))  # grid 4 x 5
    tables = {k: tuple(v.shape) for k, v in model.state_dict().items() if 'rel_pos' in k}
    blocks = {k.rsplit('.attn.', 1)[0] for k in tables}
    assert len(blocks) == model.num_blocks  # one pair per unique block, whatever the steps
    assert set(tables.values()) == {(7, 16), (9, 16)}
    assert all((v == 0).all() for k, v in model.state_dict().items() if 'rel_pos' in k)
    assert not any('rel_pos' in k for k in tiny_backbone(name).state_dict())


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('windowed', [False, True], ids=['global', 'windows'])
def test_zero_tables_compute_what_the_model_without_them_does(name, windowed):
    extra = dict(window_size=2, global_steps=(1,)) if windowed else {}
    plain, rel = build(name, use_rel_pos=False, **extra).eval(), build(name, **extra).eval()
    missing = rel.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing and all('rel_pos' in k for k in missing)
    x = torch.randn(2, 3, 80, 48)
    with torch.no_grad():
        for a, b in zip(plain(x), rel(x)):
            assert torch.equal(a, b)


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('hw', [(31, 31), (112, 137)])
def test_output_shapes_and_backward_reach_the_tables(name, hw):
    model = randomise_tables(tiny_backbone(name, use_rel_pos=True, window_size=3)).train()
    outs = model(torch.randn(2, 3, *hw))
    grid = (-(-hw[0] // 16), -(-hw[1] // 16))
    assert [tuple(o.shape) for o in outs] == [(2, 32, *grid)] * len(model.out_indices)
    sum(o.square().mean() for o in outs).backward()
    tables = {n: p for n, p in model.named_parameters() if 'rel_pos' in n}
    assert tables and all(p.grad is not None and p.grad.abs().sum() > 0 for p in tables.values()), [
        n for n, p in tables.items() if p.grad is None or p.grad.abs().sum() == 0
    ]


@pytest.mark.parametrize('name', NAMES)
def test_state_dict_round_trip_is_strict_and_exact(name):
    model = randomise_tables(build(name)).eval()
    copy = build(name).eval()
    load_state_dict_into(copy, model.state_dict(), 'round trip')
    x = torch.randn(1, 3, 48, 80)
    with torch.no_grad():
        for a, b in zip(model(x), copy(x)):
            assert torch.equal(a, b)
    plain, copy = tiny_backbone(name).state_dict(), build(name)
    if is_timm_state_dict(plain):  # PlainViT's keys are timm's: a DeiT-like start, tables zero (and logged)
        load_state_dict_into(copy, plain, 'no tables')
        assert all((p == 0).all() for n, p in copy.named_parameters() if 'rel_pos' in n)
    else:  # our own checkpoint without tables: strict
        with pytest.raises(CheckpointError, match='missing keys'):
            load_state_dict_into(copy, plain, 'no tables')


# Every backbone with windows of 2 on a 5 x 3 grid (padded) and global steps, trained-looking tables; the
# token-adaptive ones on varied active tokens in both executions (cached keys, attention among the active).
CASES = [(name, {}) for name in NAMES] + [
    ('EdgeRecViT', dict(execution='masked')),
    ('EdgeRecViT', dict(frozen_kv=False)),
    ('MoRViT', dict(routing='token_choice')),
]


@pytest.mark.parametrize('windowed', [False, True], ids=['global', 'windows'])
@pytest.mark.parametrize(
    'name, kwargs', CASES, ids=[f'{n}{"-" + "-".join(map(str, k.values())) if k else ""}' for n, k in CASES]
)
def test_every_path_equals_the_formula_reference(name, kwargs, windowed, monkeypatch):
    extra = dict(window_size=2) if windowed else {}
    model = randomise_tables(build(name, **extra, **kwargs)).eval()
    x = torch.randn(2, 3, 80, 48)
    with torch.no_grad():
        fast = model(x)
        monkeypatch.setattr(attention, 'window_attention', reference_window_attention)
        monkeypatch.setattr(attention, 'global_attention', reference_global_attention)
        monkeypatch.setattr(attention, 'image_attention', reference_image_attention)
        ref = model(x)
    for a, b in zip(fast, ref):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_token_subsets_use_their_rows_positions():
    """A subset's rows get the biases of their own grid positions: the rows of the dense block with biases
    (cached keys: every token is a key), whatever subset runs."""
    torch.manual_seed(0)
    block = Block(32, 2, rel_pos_size=(3, 4)).eval()
    randomise_tables(block, std=1.0)
    grid, P = (3, 4), 1
    x = torch.randn(2, 13, 32)
    mask = torch.rand(2, 13) < 0.5
    mask[:, 5] = True
    layout = Global(grid, P)
    cache = engine.KVCache()
    cache.update(block, x, engine.DepthSubsets(mask.long() + 1, 2), 1)  # the tokens not in mask, frozen
    with torch.no_grad():
        active = engine.TokenSubset.from_mask(mask)
        out = engine.run_subset(block, x, active, kv_cache=cache, layout=layout)
        work = engine.subset_work(block, active, True, layout)
        dense = block(x, layout=layout)
    torch.testing.assert_close(out[mask], dense[mask], atol=1e-5, rtol=1e-5)
    assert torch.equal(out[~mask], x[~mask])
    assert work.rel_pos_queries == mask.sum() / 2 and work.rel_pos_keys == 3 + 4


# ---- FLOPs, the DeiT start, checkpoints, recipes -------------------------------------------------------
@pytest.mark.parametrize(
    'name, extra',
    [
        ('PlainViT', {}),
        ('PlainViT', dict(window_size=2, global_steps=(3,))),
        ('NaiveRecursiveViT', dict(window_size=3)),
        ('SRViT', dict(window_size=3)),
        ('ReViT', {}),
        ('EdgeRecViT', dict(execution='masked')),
        ('MoRViT', dict(capacities=[1.0, 1.0, 1.0], window_size=2)),
    ],
)
def test_analytic_count_equals_mmengine_with_rel_pos(name, extra):
    """The q . R products (dim x (h_k + w_k) MACs per query) as mmengine's trace counts them."""
    plain = BACKBONES[name](**{**BACKBONE_CASES[name], **extra}).eval()
    model = BACKBONES[name](**{**BACKBONE_CASES[name], 'use_rel_pos': True, **extra}).eval()
    x = torch.randn(1, 3, 80, 64)  # 5 x 4 patches
    traced, stats = traced_with_stats(model, x)
    assert stats.flops == pytest.approx(traced, rel=1e-12)
    with torch.no_grad():
        plain_stats = plain(x).stats
    assert stats.flops > plain_stats.flops


def test_hand_count_of_the_terms():
    """PlainViT, 4 layers, 5 x 4 patches + CLS, windows of 3 at layers 0-2 (2 x 2 windows, padded), global 3 (its
    20 patch queries: CLS has no position, its terms are not computed)."""
    model = BACKBONES['PlainViT'](
        **BACKBONE_CASES['PlainViT'], use_rel_pos=True, window_size=3, global_steps=(3,)
    ).eval()
    with torch.no_grad():
        stats = model(torch.randn(1, 3, 80, 64)).stats
    blocks = [w for w in stats.work if hasattr(w, 'rel_pos_keys')]
    assert [(w.rel_pos_queries, w.rel_pos_keys) for w in blocks] == [(4 * 9, 6)] * 3 + [(20, 5 + 4)]
    plain = BACKBONES['PlainViT'](**BACKBONE_CASES['PlainViT'], window_size=3, global_steps=(3,)).eval()
    with torch.no_grad():
        plain_stats = plain(torch.randn(1, 3, 80, 64)).stats
    assert stats.flops - plain_stats.flops == 2 * 32 * (3 * 4 * 9 * 6 + 20 * 9)


@pytest.mark.parametrize(
    'name, kwargs',
    [
        ('PlainViT', dict(depth=12)),
        ('SRViT', dict(num_recursions=4)),
        ('MoRViT', dict(num_recursions=10, router_alpha=1.0)),
    ],
)
def test_deit_start_is_unchanged(deit, name, kwargs, caplog):
    """A DeiT checkpoint loads strictly into a rel-pos model (tables kept at zero and listed) and starts exactly
    where the model without them starts (docs/init_distance.md holds for both)."""
    vit, sd = deit
    common = dict(arch='tiny', embed_dim=32, num_heads=2, img_size=64, **kwargs)
    with caplog.at_level(logging.INFO, logger='mmrecvit'):
        torch.manual_seed(0)
        with_tables = distance_to_deit(BACKBONES[name](**common, use_rel_pos=True), vit, sd)
    assert 'relative position tables' in caplog.text
    torch.manual_seed(0)
    assert with_tables == distance_to_deit(BACKBONES[name](**common), vit, sd)


def test_foreign_tables_are_resized_and_partial_sets_refused(deit, caplog):
    """ViTDet/SAM-style `blocks.i.attn.rel_pos_h` of another length (a 2*64-1 global block) are resized as
    get_rel_pos does; a checkpoint with only some tables is an error, not a start."""
    _, sd = deit
    model = BACKBONES['PlainViT'](arch='tiny', embed_dim=32, num_heads=2, img_size=64, depth=12, use_rel_pos=True)
    tables = {f'blocks.{i}.attn.rel_pos_{a}': torch.randn(127, 16) for i in range(12) for a in 'hw'}
    with caplog.at_level(logging.INFO, logger='mmrecvit'):
        load_state_dict_into(model, {**sd, **tables}, 'vitdet-like')
    assert 'resized relative position tables' in caplog.text
    torch.testing.assert_close(model.blocks[3].attn.rel_pos_w, resized(tables['blocks.3.attn.rel_pos_w'], 4))
    with pytest.raises(CheckpointError, match='missing keys'):
        load_state_dict_into(model, {**sd, 'blocks.0.attn.rel_pos_h': torch.zeros(7, 16)}, 'partial')


def test_folded_revit_keeps_the_shared_tables():
    revit = randomise_tables(build('ReViT')).eval()
    dense = fold_to_plainvit(revit)
    assert dense.use_rel_pos
    x = torch.randn(1, 3, 64, 80)
    with torch.no_grad():
        for a, b in zip(revit(x), dense(x)):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
