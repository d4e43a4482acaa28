"""Routers decide in fp32 (issue 48.6, `mmrecvit/models/numerics.py`, "Routers decide in fp32").

* A whole-model bf16 cast (`.bfloat16()`, what FSDP's mixed precision hands the forward) routes as the fp32 model:
  SR-ViT's mixture weights, reViT's gates, Edge-RecViT's depths and MoR-ViT's selections, and the routers' gradients,
  for every router of the six backbones. The routers' logits share a large offset across the choices (a drift that
  softmax, argmax and top-k ignore and only the z-losses discourage) and differ by O(SPREAD): bf16 logits round the
  differences away (spacing 0.125 at 16), fp32 logits keep them. What remains is the bf16 blocks' own rounding.
* Where TF32 is allowed (CUDA; emulated here) the router products stay fp32-accurate (3xTF32, `split_mm`), forward
  and backward; oneDNN's reduced-precision fp32 products on CPU do not reach them either.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from backbone_cases import tiny_backbone

from mmrecvit.models import numerics
from mmrecvit.models.numerics import fp32_linear, split_mm, tf32_split
from mmrecvit.models.srvit_layers import SoftRouter

pytestmark = pytest.mark.usefixtures('one_thread')

OFFSET, SPREAD = 16.0, 0.03
# (case id, backbone, kwargs, router parameters whose gradients are compared)
CASES = [
    ('SRViT', 'SRViT', {}, ['routers.0.proj.weight', 'routers.2.proj.bias']),
    ('SRViT-hard', 'SRViT', dict(readout='hard'), ['routers.0.proj.weight', 'routers.2.proj.bias']),
    ('SRViT-recursion_states', 'SRViT', dict(router_input='recursion_states'), ['routers.0.proj.weight']),
    ('ReViT', 'ReViT', {}, ['router.fc1.weight', 'router.fc2.weight', 'router.fc2.bias']),
    ('EdgeRecViT', 'EdgeRecViT', {}, ['ranker.fc1.weight', 'ranker.fc2.weight']),
    ('MoRViT', 'MoRViT', dict(capacities=(1.0, 0.5, 0.25)), ['routers.1.weight', 'routers.2.bias']),
    ('MoRViT-token_choice', 'MoRViT', dict(routing='token_choice'), ['router.weight', 'router.bias']),
]
# Discrete decisions (token maps of whole numbers): the share of tokens deciding as in fp32. Continuous ones (SR-ViT's
# soft mixture weights, reViT's gates): the largest difference. Router gradients: the relative L2 error. Measured with
# fp32 routers (the bf16 blocks alone): every decision, weights within 1e-4, gradients within 0.09 (SR-ViT's first
# router: its gradient reads the differences of bf16 recursion states). With bf16 routers: 41-94 % of the decisions,
# weights off by 0.005-0.013, gradients by 0.12-7.6 (reViT's 0.03, whose exact gates fail below).
SAME_DECISIONS, WEIGHT_TOL, GRAD_TOL = 0.99, 0.002, 0.15


def router_layers(model):
    """(name, module) of every linear layer of the routers and rankers."""
    layers = model.named_modules()
    return [(n, m) for n, m in layers if isinstance(m, torch.nn.Linear) and ('router' in n or 'ranker' in n)]


def drifted(name, kwargs):
    """The tiny `name` whose router logits share `OFFSET` (their last layer's bias, or a common part of the ranker's
    bias-free rows) and differ by O(`SPREAD`); every parameter rounded to bf16, so that the cast changes none."""
    model = tiny_backbone(name, drop_path_rate=0.0, **kwargs)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for layer_name, layer in router_layers(model):
            if layer_name.endswith('router.fc1'):
                continue  # reViT's fc1 reads the depth coordinate: its default init spreads the hidden units
            noise = torch.randn(layer.weight.shape, generator=gen) / layer.in_features**0.5
            if layer.bias is not None:
                layer.weight.copy_(SPREAD * noise)
                layer.bias.copy_(OFFSET + SPREAD * torch.randn(layer.bias.shape, generator=gen))
            elif layer_name.endswith('fc2'):  # Edge-RecViT's ranker: each row = a common part + its own
                layer.weight.copy_(4 * OFFSET / layer.in_features + SPREAD * noise)
            else:
                layer.weight.copy_(noise)
        for p in model.parameters():
            p.copy_(p.bfloat16())
    return model


def routing(stats):
    """The decisions a forward reports: token maps (SR-ViT's `mixture/unit*`, Edge-RecViT's `depth`, MoR-ViT's
    `recursions`) and reViT's gate table."""
    out = {k: v.float() for k, v in stats.token_maps.items() if k != 'confidence'}
    out.update({k: v.float() for k, v in stats.tables.items() if k == 'gates'})
    return out


def run(model, x, train, params):
    """Routing, router gradients (train) and the dtypes of every router product of one forward (and backward)."""
    dtypes = []

    def record(out):
        dtypes.append(out.dtype)
        return out

    hooks = [m.register_forward_hook(lambda mod, inp, out: record(out)) for _, m in router_layers(model)]
    for m in model.modules():
        if isinstance(m, SoftRouter):  # 'recursion_states' scores each recursion with one row, not through `forward`
            m.recursion_logit = lambda h, t, score=m.recursion_logit: record(score(h, t))
    model.train(train)
    model.zero_grad(set_to_none=True)
    torch.manual_seed(5)  # Edge-RecViT's Gumbel noise: the same draws in both models
    with torch.set_grad_enabled(train):
        outs = model(x)
    for h in hooks:
        h.remove()
    for m in model.modules():
        m.__dict__.pop('recursion_logit', None)
    grads = {}
    if train:
        gen = torch.Generator().manual_seed(7)
        loss = sum((o.float() * torch.randn(o.shape, generator=gen)).mean() for o in outs)
        (loss + sum(v.float() for v in outs.stats.aux_losses.values())).backward()
        grads = {p: model.get_parameter(p).grad for p in params}
    return routing(outs.stats), grads, dtypes


@pytest.mark.parametrize('case, name, kwargs, params', CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize('train', [True, False], ids=['train', 'eval'])
def test_a_bf16_cast_model_routes_as_the_fp32_model(case, name, kwargs, params, train):
    model = drifted(name, kwargs)
    cast = copy.deepcopy(model).bfloat16()
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(2)).bfloat16()
    ref, ref_grads, _ = run(model, x.float(), train, params)
    got, got_grads, dtypes = run(cast, x, train, params)
    assert dtypes and set(dtypes) == {torch.float32}, f'router products in {set(dtypes)}'
    assert got.keys() == ref.keys()
    for key in ref:
        if key == 'gates' or (key.startswith('mixture') and kwargs.get('readout') != 'hard'):
            diff = float((got[key] - ref[key]).abs().max())
            assert diff <= WEIGHT_TOL, f'{key}: bf16 model off by {diff:.3g} (tolerance {WEIGHT_TOL})'
        else:
            same = float((got[key] == ref[key]).float().mean())
            assert same >= SAME_DECISIONS, f'{key}: {same:.1%} of the decisions as in fp32'
    for p, grad in got_grads.items():
        assert grad.dtype == torch.bfloat16  # the gradients flow back in the parameters' dtype
        error = float((grad.float() - ref_grads[p]).norm() / ref_grads[p].norm())
        assert error <= GRAD_TOL, f'{p}: gradient off by {error:.3g} relative (tolerance {GRAD_TOL})'


def test_revit_gates_are_exact_under_a_bf16_cast():
    """reViT's router reads the depth coordinates, the same in both models: its gates are bit for bit fp32's."""
    model = drifted('ReViT', {})
    cast = copy.deepcopy(model).bfloat16()
    coords = [0.0, 0.25, 0.5, 1.0]
    (gates, logits), (cast_gates, cast_logits) = model.route(coords), cast.route(coords)
    assert cast_logits.dtype == torch.float32
    assert torch.equal(cast_logits, logits) and torch.equal(cast_gates, gates)


# ---- TF32 and oneDNN's reduced-precision fp32 products ------------------------------------------------------------
def tf32(t):
    """fp32 -> the nearest TF32 value (10 mantissa bits, ties to even): what a TF32 product reads."""
    bits = t.view(torch.int32)
    return ((bits + 0xFFF + ((bits >> 13) & 1)) & -0x2000).view(torch.float32)


def tf32_mm(a, b):
    """A TF32 product, emulated: TF32 inputs, accumulated in fp64 (the device: fp32) and rounded to fp32."""
    return (tf32(a).double() @ tf32(b).double()).float()


def test_tf32_split_is_exact_and_its_high_part_tf32():
    t = torch.randn(1000) * torch.logspace(-30, 30, 1000)
    hi, lo = tf32_split(t)
    assert torch.equal(hi + lo, t)
    assert torch.equal(tf32(hi), hi)
    assert (lo.abs() <= t.abs() * 2.0**-11).all()


def test_split_products_are_fp32_accurate_where_tf32_is_allowed():
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 384, generator=gen), torch.randn(384, 12, generator=gen)
    ref = a.double() @ b.double()
    scale = a.abs().double() @ b.abs().double()  # what the rounding errors scale with

    def error(c):
        return float(((c.double() - ref).abs() / scale).max())

    assert error(tf32_mm(a, b)) > 2e-5  # TF32 alone: inputs rounded by up to 2^-11
    assert error(split_mm(a, b, tf32_mm)) < 4e-7  # 3xTF32: as an fp32 product
    assert error(a @ b) < 4e-7


@pytest.mark.parametrize('emulated', [False, True], ids=['fp32', 'tf32-emulated'])
def test_split_linear_is_fp32_accurate_forward_and_backward(emulated, monkeypatch):
    """The autograd Function `fp32_linear` takes on a CUDA device that allows TF32, run on CPU with fp32 products
    and with emulated TF32 ones: `F.linear`'s values and gradients at fp32 accuracy."""
    if emulated:
        monkeypatch.setattr(numerics, 'split_mm', lambda a, b: split_mm(a, b, tf32_mm))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 256, generator=gen, requires_grad=True)
    w = torch.randn(3, 256, generator=gen, requires_grad=True)
    b = torch.randn(3, generator=gen, requires_grad=True)
    g = torch.randn(2, 5, 3, generator=gen)
    ours = numerics._SplitLinear.apply(x, w, b)
    got = torch.autograd.grad(ours, (x, w, b), g)
    ref = F.linear(x.double(), w.double(), b.double())
    want = torch.autograd.grad(ref, (x, w, b), g.double())
    for o, r in zip((ours.detach(), *got), (ref.detach(), *want)):
        assert o.dtype == torch.float32
        assert float((o.double() - r).abs().max() / r.abs().max()) < 1e-6


def test_onednn_reduced_precision_does_not_reach_the_routers():
    previous = torch.backends.mkldnn.matmul.fp32_precision
    try:
        torch.backends.mkldnn.matmul.fp32_precision = 'bf16'
        gen = torch.Generator().manual_seed(0)
        x, w, b = torch.randn(4, 64, generator=gen), torch.randn(8, 64, generator=gen), torch.randn(8, generator=gen)
        assert torch.equal(fp32_linear(x, w, b), F.linear(x.double(), w.double(), b.double()).float())
    finally:
        torch.backends.mkldnn.matmul.fp32_precision = previous
