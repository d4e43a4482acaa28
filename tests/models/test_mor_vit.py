"""MoR-ViT (docs/methods/mor_vit.md): routing against a masked dense reference, hierarchy, gates, losses, knobs,
timm map."""

import math

import pytest
import torch
import torch.nn.functional as F
from backbone_cases import distance_to_deit, masked_attention, token_states
from timm.models.vision_transformer import VisionTransformer

from mmrecvit.models import MoRViT
from mmrecvit.models import token_adaptive as engine
from mmrecvit.models.checkpoint import load_pretrained

TINY = dict(arch='tiny', embed_dim=32, num_heads=2, img_size=64)  # N_r = 10, L = 12 by default

HALF = [round((10 - r) / 20, 3) for r in range(10)]  # half the default capacities

ROUTINGS = ('expert_choice', 'token_choice')

pytestmark = pytest.mark.usefixtures('one_thread')


def build(**kw):
    torch.manual_seed(0)
    model = MoRViT(**{**TINY, **kw}).eval()
    routers = model.routers if model.routing == 'expert_choice' else [model.router]
    with torch.no_grad():  # spread router scores so that selections and depths depend on the content
        for router in routers:
            router.weight.mul_(50.0)
    return model


def masked_block(block, x, chosen):
    """The dense block with attention restricted to the `chosen` (B, N) keys."""
    h = x + masked_attention(block, x, chosen[:, None, None, :])
    return h + block.mlp(block.norm2(h))


def reference(model, tokens):
    """Masked dense reference of MoR (docs/methods/mor_vit.md), written independently of the model's routing code:
    every token runs every step; at recursion r only the chosen tokens are updated,
    `h <- h + g (Block(h) - h)`, and attention is masked to the chosen keys.
    Returns the states after every step, the chosen masks per recursion and the BCE per recursion."""
    x, P = tokens, model.num_prefix_tokens
    B, N, _ = x.shape
    Np, R = N - P, model.num_recursions
    chosen = torch.ones(B, N, dtype=torch.bool)
    states, masks, bces = [], [], []
    for s in range(model.depth):
        block, r = model.blocks[model.schedule[s]], model.layer_recursions[s]
        if r is None:
            x = block(x)
        else:
            if model.layer_recursions[s - 1] != r:
                if model.routing == 'expert_choice':
                    logit = model.routers[r](x).squeeze(-1)  # (B, N)
                    cand = chosen[:, P:]
                    k = min(int(cand[0].sum()), math.ceil(model.capacity_schedule[r] * Np - 1e-9))
                    top = logit[:, P:].masked_fill(~cand, -math.inf).topk(k, dim=1).indices
                    picked = torch.zeros(B, Np, dtype=torch.bool).scatter(1, top, True)
                    bces.append(F.binary_cross_entropy_with_logits(logit[:, P:][cand], picked[cand].float()))
                    g = model.alpha * torch.sigmoid(logit)[..., None]
                else:
                    if r == 0:
                        z = model.router(x)  # (B, N, N_r)
                        depth = torch.cat([torch.full((B, P), R), z[:, P:].argmax(-1) + 1], 1)
                        g = model.alpha * z.softmax(-1).gather(-1, depth[..., None] - 1)
                    picked = (depth > r)[:, P:]
                chosen = torch.cat([torch.ones(B, P, dtype=torch.bool), picked], 1)
                masks.append(chosen)
            x = torch.where(chosen[..., None], x + g * (masked_block(block, x, chosen) - x), x)
        states.append(x)
    return states, masks, bces


def record_subsets(monkeypatch):
    """Spy on the engine: the (B, N) mask of every subset MoR runs."""
    seen = []
    real = engine.run_subset  # every subset run goes through the engine's one function

    def spy(block, x, active, **kw):
        seen.append(active.mask())
        return real(block, x, active, **kw)

    monkeypatch.setattr(engine, 'run_subset', spy)
    return seen


def test_structure_and_sizes():
    model = MoRViT(arch='small')
    assert model.depth == 12 and len(model.blocks) == 3 and model.schedule == [0] + [1] * 10 + [2]
    assert model.layer_recursions == [None, *range(10), None] and len(model.routers) == 10
    assert model.out_indices == (2, 5, 8, 11)
    assert model.capacity_schedule == pytest.approx([1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1])
    assert MoRViT(**TINY, num_recursions=3).capacity_schedule == pytest.approx(
        [1, 2 / 3, 1 / 3]
    )  # docs/methods/mor_vit.md
    unit = MoRViT(**TINY, num_recursions=3, unit_size=2)
    assert unit.depth == 8 and unit.schedule == [0, 1, 2, 1, 2, 1, 2, 3]
    assert unit.layer_recursions == [None, 0, 0, 1, 1, 2, 2, None]
    token = MoRViT(**TINY, routing='token_choice')
    assert token.router.out_features == 10 and not hasattr(token, 'routers') and token.alpha == 1.0
    for arch, dim in (('tiny', 192), ('small', 384), ('base', 768)):
        m = MoRViT(arch=arch)
        block = sum(p.numel() for p in m.blocks[0].parameters())
        embed = m.patch_embed.proj.weight.numel() + dim + m.cls_token.numel() + m.pos_embed.numel()
        assert sum(p.numel() for p in m.parameters()) == 3 * block + embed + 10 * (dim + 1)
    # layer-wise LR decay (default rule over `schedule`): shared block at the mean of positions 2..11
    assert model.layer_depth('blocks.0.attn.qkv.weight') == 1.0
    assert model.layer_depth('blocks.1.mlp.fc1.weight') == 6.5
    assert model.layer_depth('blocks.2.norm1.bias') == 12.0
    assert model.layer_depth('routers.3.weight') == model.num_layers + 1 == 13  # above every layer


@pytest.mark.parametrize(
    'case',
    [
        dict(),
        dict(capacities=HALF, grad=True),  # the out-of-place (autograd) path of the engine
        dict(capacities=[0.7] * 4 + [0.3] * 6, with_cls_token=False),
        dict(num_recursions=3, unit_size=2, capacities=[0.8, 0.5, 0.5], router_alpha=0.4),
        dict(routing='token_choice'),
        dict(routing='token_choice', num_recursions=4, unit_size=2, grad=True),
    ],
)
def test_engine_equals_masked_dense_reference(case, monkeypatch):
    """Attention really runs among the chosen tokens only, unchosen tokens keep their state, and the
    engine computes only the chosen rows: states after every step equal the masked dense reference."""
    case = dict(case)
    grad = case.pop('grad', False)
    model = build(**case)
    seen = record_subsets(monkeypatch)
    images = torch.randn(3, 3, 80, 112)  # 5 x 7 = 35 patch tokens
    tokens = model.embed(images)
    steps = list(range(model.depth))
    with torch.set_grad_enabled(grad):
        fast, stats = token_states(model, images, steps)
    with torch.no_grad():
        ref, masks, bces = reference(model, tokens)
    for s, (a, b) in enumerate(zip(fast, ref)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=f'step {s}')
    u = model.unit_size
    assert len(seen) == u * model.num_recursions
    for r, mask in enumerate(masks):
        assert all(torch.equal(m, mask) for m in seen[r * u : (r + 1) * u])  # the engine ran those rows
    # StepWork: the first and last block see every token, recursion steps only the chosen ones
    N = tokens.shape[1]
    queries = [s.queries for s in stats.blocks]
    expected = [N] + [m.sum().item() / 3 for m in masks for _ in range(u)] + [N]
    assert queries == pytest.approx(expected) and sum(queries) < model.depth * N
    if model.routing == 'expert_choice':
        assert [s.keys for s in stats.blocks[1:-1]] == queries[1:-1]  # keys = the chosen tokens
        assert 'loss_router_bce' not in stats.aux_losses  # eval: the training term is not computed
        with torch.no_grad():
            _, trained = token_states(model.train(), images, steps)  # the same selection (no drop path here)
        torch.testing.assert_close(trained.aux_losses['loss_router_bce'], 1e-3 * torch.stack(bces).mean())
    else:
        counts = {m.sum().item() for m in masks[1]}
        assert len(counts) > 1, 'token-choice case must give different counts per image'
    depth = stats.token_maps['recursions'].flatten(1)  # (B, h, w) -> (B, Np)
    P = model.num_prefix_tokens
    assert torch.equal(depth, torch.stack(masks).sum(0)[:, P:])


def test_expert_choice_hierarchy_capacities_and_cls(monkeypatch):
    seen = record_subsets(monkeypatch)
    model = build(capacities=[1.0, 0.9, 0.9, 0.5, 0.5, 0.5, 0.3, 0.2, 0.05, 0.05])
    with torch.no_grad():
        stats = model(torch.randn(2, 3, 64, 80)).stats  # 20 patch tokens + CLS
    ks = [math.ceil(c * 20 - 1e-9) for c in model.capacity_schedule]  # 20, 18, 18, 10, ..., 1, 1
    assert [m.sum(1).tolist() for m in seen] == [[k + 1] * 2 for k in ks]
    for prev, cur in zip(seen, seen[1:]):
        assert not (cur & ~prev).any()  # chosen at r is a subset of chosen at r-1
    assert all(m[:, 0].all() for m in seen)  # CLS always continues
    scalars = stats.scalars
    assert [scalars[f'sel/r{r}'].item() for r in range(10)] == pytest.approx([k / 20 for k in ks])
    assert scalars['recursions/mean'].item() == pytest.approx(sum(ks) / 20)
    assert stats.token_maps['recursions'].shape == (2, 4, 5)


def test_cls_continues_even_when_the_router_ranks_it_last(monkeypatch):
    seen = record_subsets(monkeypatch)
    model = build(capacities=[0.1] * 10)
    e = torch.zeros(32)
    e[0] = 1.0
    with torch.no_grad():
        model.cls_token.copy_(20 * e)  # CLS far along e, every router scores 40 - <h, e>
        for router in model.routers:
            router.weight.copy_(-e[None])
            router.bias.fill_(40.0)  # every gate ~ alpha, so CLS visibly moves
        states, stats = token_states(model, torch.randn(1, 3, 64, 64), range(12))
        scores = [model.routers[0](states[s][0]).squeeze(-1) for s in range(11)]
    assert all(sc.argmin() == 0 for sc in scores)  # the router ranks CLS last before every recursion
    assert [s.queries for s in stats.blocks] == [17] + [3] * 10 + [17]  # 1 CLS + ceil(0.1 * 16)
    assert all(m[0, 0] for m in seen)
    for s in range(1, 11):
        assert not torch.allclose(states[s][:, 0], states[s - 1][:, 0])


def test_gate_formula():
    """One recursion, every token chosen: x1 = x0 + g (Block(x0) - x0), g = alpha sigmoid(router(x0))."""
    model = build(num_recursions=1, router_alpha=0.3)
    with torch.no_grad():
        (x0, x1), stats = token_states(model, torch.randn(2, 3, 48, 64), [0, 1])
        g = 0.3 * torch.sigmoid(model.routers[0](x0))
        torch.testing.assert_close(x1, x0 + g * (model.blocks[1](x0) - x0))
    assert stats.scalars['gate/mean'].item() == pytest.approx(g.mean().item(), rel=1e-5)
    assert MoRViT(**TINY).alpha == 0.1  # the default of docs/methods/mor_vit.md


def test_capacity_knob_at_inference_without_retraining():
    model = build()
    images = torch.randn(2, 3, 64, 64)
    work, outs = {}, {}
    for name, caps in (('full', [1.0] * 10), ('default', None), ('half', HALF)):
        model.capacities = caps  # what --cfg-options model.backbone.capacities=[...] sets
        with torch.no_grad():
            outs[name] = model(images)
        work[name] = sum(s.queries for s in outs[name].stats.blocks)
        assert all(o.shape == (2, 32, 4, 4) and torch.isfinite(o).all() for o in outs[name])
    assert work['full'] == 12 * 17 and work['full'] > work['default'] > work['half']
    assert not torch.allclose(outs['full'][-1], outs['half'][-1])
    # same parameters, any capacities: the state dict loads strictly across them
    MoRViT(**TINY, capacities=HALF).load_state_dict(model.state_dict(), strict=True)
    flops = {}
    for name, caps in (('full', [1.0] * 10), ('half', HALF)):
        model.capacities = caps
        with torch.no_grad():
            flops[name] = model(images).stats.flops
    D, N = 32, 17
    fixed = 2 * 16 * (3 * 16 * 16 * D)  # patch embedding
    dense_step = 2 * (N * 12 * D * D + 2 * N * N * D)  # qkv, proj, MLP + q.k, attn.v
    assert flops['full'] == pytest.approx(fixed + 12 * dense_step + 10 * 2 * D * N)  # + routers on every token
    assert flops['half'] < 0.55 * flops['full']


def test_token_choice_depths_losses_and_gradients():
    model = build(routing='token_choice', balance_loss_weight=0.2, z_loss_weight=1e-3)
    images = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        x0 = token_states(model, images, [0])[0][0]
        z = model.router(x0)[:, 1:]
        stats = model(images).stats
    depth = z.argmax(-1) + 1
    assert torch.equal(stats.token_maps['recursions'].flatten(1), depth) and 1 < depth.float().mean() < 10
    f = F.one_hot(depth - 1, 10).float().mean((0, 1))
    torch.testing.assert_close(stats.aux_losses['loss_balance'], 0.2 * 10 * (z.softmax(-1).mean((0, 1)) * f).sum())
    torch.testing.assert_close(stats.aux_losses['loss_z'], 1e-3 * torch.logsumexp(z, -1).square().mean())
    assert [stats.scalars[f'sel/r{r}'].item() for r in range(10)] == pytest.approx(
        [(depth > r).float().mean().item() for r in range(10)]
    )
    assert [s.queries for s in stats.blocks[1:-1]] == pytest.approx(
        [((depth > r).sum().item() + 2) / 2 for r in range(10)]
    )  # + CLS of each image
    # training: every parameter gets a gradient, the router through the gate alone as well
    model.train()
    outs = model(images)
    sum(o.square().mean() for o in outs).backward()
    assert model.router.weight.grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)
    outs = model(images)
    (sum(o.square().mean() for o in outs) + sum(outs.stats.aux_losses.values())).backward()
    assert not [n for n, p in model.named_parameters() if p.grad is None]


def test_expert_choice_routers_learn_through_the_gate():
    model = build(capacities=HALF).train()
    outs = model(torch.randn(2, 3, 64, 64))
    sum(o.square().mean() for o in outs).backward()  # no aux loss
    assert all(r.weight.grad.abs().sum() > 0 for r in model.routers)


def test_autocast_runs_both_routings():
    for routing in ROUTINGS:
        model = build(routing=routing)
        images = torch.randn(2, 3, 64, 96)
        with torch.no_grad():
            ref = model(images)
            with torch.autocast('cpu', dtype=torch.bfloat16):
                low = model(images)
        assert all(a.shape == b.shape and torch.isfinite(b).all() for a, b in zip(ref, low))


@pytest.mark.parametrize('unit_size', [1, 2])
def test_shared_init_average_and_pick(tmp_path, unit_size):
    torch.manual_seed(0)
    ref = VisionTransformer(img_size=64, patch_size=16, embed_dim=32, depth=12, num_heads=2, num_classes=5)
    theirs = ref.state_dict()
    path = str(tmp_path / 'deit.pth')
    torch.save({'model': theirs}, path)
    R = 10 // unit_size
    for mode in ('average', 'pick'):
        pick = dict(shared_init_block=4) if mode == 'pick' else {}  # 'average' picks no block: refused with it
        model = MoRViT(**TINY, num_recursions=R, unit_size=unit_size, shared_init=mode, **pick)
        routers = {k: v.clone() for k, v in model.routers.state_dict().items()}
        load_pretrained(model, path)
        sd = model.state_dict()
        for k in ref.blocks[0].state_dict():
            assert torch.equal(sd[f'blocks.0.{k}'], theirs[f'blocks.0.{k}'])
            assert torch.equal(sd[f'blocks.{unit_size + 1}.{k}'], theirs[f'blocks.11.{k}'])
            for j in range(unit_size):
                if mode == 'average':  # the tied layers: the middle blocks this unit block replaces
                    tied = [1 + j + unit_size * r for r in range(R)]
                    expected = torch.stack([theirs[f'blocks.{i}.{k}'] for i in tied]).mean(0)
                else:
                    expected = theirs[f'blocks.{4 + j}.{k}']
                torch.testing.assert_close(sd[f'blocks.{1 + j}.{k}'], expected, rtol=0, atol=1e-7)
        assert torch.equal(sd['pos_embed'], theirs['pos_embed'])
        for k, v in routers.items():  # weights kept fresh; router_init='open': every gate starts at 0.99
            got = model.routers.state_dict()[k]
            assert torch.equal(got, v) if k.endswith('weight') else torch.allclose(got.sigmoid(), torch.tensor(0.99))
    with pytest.raises(ValueError, match='shared_init_block=11'):
        load_pretrained(MoRViT(**TINY, unit_size=2, num_recursions=5, shared_init='pick', shared_init_block=11), path)


@pytest.mark.parametrize(
    'kwargs, exc, words',
    [
        (dict(capacities=[0.0] + [0.5] * 9), ValueError, ['capacities', '(0.0, 1.0]']),
        (dict(capacities=[1.5] + [0.5] * 9), ValueError, ['capacities', '(0.0, 1.0]']),
        (dict(capacities=[0.5] * 9 + [0.6]), ValueError, ['capacities', 'non-increasing', 'expert-choice']),
        (dict(capacities=[1.0] * 3), ValueError, ['capacities', 'num_recursions=10']),
        (dict(capacities=0.5), TypeError, ['capacities', 'list or tuple']),
        (dict(capacities=['1'] * 10), TypeError, ['capacities']),
        (dict(num_recursions=0), ValueError, ['num_recursions', '[1, inf]']),
        (dict(unit_size=0), ValueError, ['unit_size']),
        (dict(routing='soft'), ValueError, ['routing', 'expert_choice', 'token_choice']),
        (dict(routing='token_choice', capacities=[1.0] * 10), ValueError, ['capacities', 'expert_choice']),
        (dict(router_alpha=0.0), ValueError, ['router_alpha']),
        (dict(bce_loss_weight=-1.0), ValueError, ['bce_loss_weight']),
        (dict(routing='token_choice', balance_loss_weight='0.1'), TypeError, ['balance_loss_weight']),
        (dict(routing='token_choice', z_loss_weight=-1e-5), ValueError, ['z_loss_weight']),
        (dict(shared_init='middle'), ValueError, ['shared_init', 'average', 'pick']),
        (dict(shared_init_block=-1), ValueError, ['shared_init_block']),
        (dict(out_indices=[12]), ValueError, ['out_indices']),
    ],
)
def test_bad_arguments(kwargs, exc, words):
    with pytest.raises(exc) as info:
        MoRViT(**{**TINY, **kwargs})
    for w in words:
        assert w in str(info.value), f'{w!r} not in error: {info.value}'


def test_bad_capacities_set_on_a_built_model_are_caught_at_forward():
    model = build()
    model.capacities = [0.2] + [0.5] * 9
    with pytest.raises(ValueError, match='non-increasing'):
        model(torch.randn(1, 3, 32, 32))


def test_mor_open_gates_apply_whole_blocks(deit):
    """With a shared unit as deep as DeiT's middle (one recursion of 10 blocks), alpha = 1, open
    gates and full capacity, MoR-ViT starts as DeiT; the from-scratch gates (alpha 0.1) do not."""
    vit, sd = deit
    kwargs = dict(**TINY, num_recursions=1, unit_size=10, capacities=[1.0], shared_init='pick', shared_init_block=1)
    cosine, error = distance_to_deit(MoRViT(**kwargs, router_alpha=1.0), vit, sd)
    _, old_error = distance_to_deit(MoRViT(**kwargs, router_init='fresh'), vit, sd)
    assert cosine >= 0.999 and error < 0.1 * old_error


# ---- low precision: routers decide in full precision, ties broken deterministically ----------------------------
def mor_with_linear_scores(scores):
    """MoR-ViT whose routers score a token by its channel 0 plus 1 (and states carrying `scores` there)."""
    model = MoRViT(**TINY, num_recursions=3, capacities=[0.5, 0.25, 0.125]).eval()
    with torch.no_grad():
        for router in model.routers:
            router.weight.zero_()
            router.weight[0, 0] = 1.0
            router.bias.fill_(1.0)
    x = torch.zeros(scores.shape[0], 1 + scores.shape[1], 32)
    x[:, 1:, 0] = scores
    return model, x


def test_exact_ties_break_by_position(monkeypatch):
    model, x = mor_with_linear_scores(torch.zeros(1, 16))  # every token scores the same
    monkeypatch.setattr(model, 'embed', lambda images, grid: x)  # these states instead of an image's tokens
    with torch.no_grad():
        stats = model(torch.zeros(1, 3, 64, 64)).stats  # a 4 x 4 grid: the 16 tokens of x
    assert stats.token_maps['recursions'][0].flatten().tolist() == [3, 3, 2, 2, 1, 1, 1, 1] + [0] * 8


def test_mor_additive_update():
    """'additive': h <- h + g Block(h), MoR's code; 'interpolate': h + g (Block(h) - h)."""
    for update in ('interpolate', 'additive'):
        model = MoRViT(**TINY, num_recursions=1, capacities=[1.0], router_alpha=1.0, update=update).eval()
        images = torch.randn(1, 3, 64, 64)
        x = model.embed(images)
        with torch.no_grad():
            first = model.blocks[0](x)
            g = torch.sigmoid(model.routers[0](first))  # (1, N, 1)
            block = model.blocks[1](first)
            mid = first + g * block if update == 'additive' else first + g * (block - first)
            expected = model.blocks[2](mid)
            got = token_states(model, images, [2])[0][0]
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def chosen(model, x):
    from mmrecvit.models.mor_routing import ExpertChoice
    from mmrecvit.models.token_adaptive import capacity_tokens

    k = capacity_tokens(model.capacity_schedule[0], x.shape[1] - 1)
    active, _ = ExpertChoice(model, x).select(0, x, k)
    return active.index


def test_router_selection_under_bf16_autocast_equals_fp32():
    """Scores 1 + a ramp of 1e-4 steps: distinct in fp32, mostly tied in bf16 (8 mantissa bits)."""
    model, x = mor_with_linear_scores(torch.linspace(0, 6.3e-3, 64).flip(0).roll(17).expand(2, 64))
    with torch.no_grad():
        fp32 = chosen(model, x)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            bf16, again = chosen(model, x), chosen(model, x)
    assert torch.equal(bf16, fp32) and torch.equal(again, bf16)
    assert len(torch.unique(torch.linspace(0, 6.3e-3, 64).add(1).bfloat16())) < 10  # the ties bf16 would make
