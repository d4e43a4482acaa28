"""The GPU check's model checks (`gpu_check.py`): parity, router_tf32, sync and attention; compile and reViT's step
dropout are in `gpu_check_compile.py`.

They build each method's backbone as its ViTDet recipe configures it (`CASES`: with_cp, 14x14 windows with rel-pos,
drop path 0.1, the method's own settings; `model_case`), random weights, at S on a GPU; in `--quick` at width 32
and 64x64 inputs (4x4 patches, 2x2 windows), which keeps every code path at a fraction of the cost.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ..models import BACKBONES
from ..models.numerics import RouterLinear
from .gpu_check_results import REPO, Result, Setup, guarded, skipped
from .host_sync import HostSyncCounter


class Case(NamedTuple):
    """A model of the checks: its name, the ViTDet recipe whose backbone it is, and arguments on top."""

    name: str
    recipe: str
    kwargs: dict[str, Any] = {}


RECIPE = 'configs/det/mask-rcnn_{}_vitdet-fpn_16xb4-amp-lsj-100e_coco.py'
CASES = (
    Case('PlainViT', 'plainvit-s'),
    Case('NaiveRecursiveViT', 'naiverecvit-s'),
    Case('SRViT', 'srvit-s'),
    Case('ReViT', 'revit-s'),
    Case('ReViT-elastic', 'revit-s-elastic'),  # step dropout 0.3
    Case('EdgeRecViT', 'edgerecvit-s'),
    Case('MoRViT', 'morvit-s'),
    Case('MoRViT-token_choice', 'morvit-s', dict(routing='token_choice')),
)
QUICK = dict(embed_dim=32, num_heads=2, img_size=64, window_size=2)  # --quick: every code path, tiny
# --quick's cases where a case is costly (dynamo's tracing, a process group): one per kind of code path
QUICK_CASES = {'compile': ('PlainViT',), 'ddp': ('PlainViT', 'MoRViT'), 'fsdp': ('PlainViT', 'SRViT', 'ReViT')}
DATA_DEPENDENT_EVAL = ('EdgeRecViT', 'MoRViT-token_choice')  # eval shapes follow the data: one sync allowed (48.2)


def cases(setup: Setup, check: str) -> list[Case]:
    """The models `check` runs: every case, or in `--quick` those of `QUICK_CASES`."""
    names = QUICK_CASES.get(check) if setup.quick else None
    return [case for case in CASES if names is None or case.name in names]


def recipe_backbone(recipe: str) -> dict[str, Any]:
    """The backbone config of a ViTDet recipe (mmengine's Config: its bases merged), without its checkpoint."""
    from mmengine.config import Config

    cfg = Config.fromfile(str(REPO / RECIPE.format(recipe))).model.backbone.to_dict()
    cfg.pop('init_cfg', None)
    return cfg


def model_case(case: Case, setup: Setup, **overrides: Any) -> nn.Module:
    """`case`'s backbone, seeded, on `setup.device` (tiny in `--quick`)."""
    kwargs = {**recipe_backbone(case.recipe), **case.kwargs, **(QUICK if setup.quick else {}), **overrides}
    torch.manual_seed(0)
    return BACKBONES[kwargs.pop('type')](**kwargs).to(setup.device)


def input_size(setup: Setup, check: str) -> tuple[int, int]:
    """(batch, side) of the checks' inputs: the recipe's 4 images at 1024 where a GPU runs alone, less where the CPU
    computes the reference (parity) or a dry run."""
    if setup.quick:
        return 2, 64
    if check == 'parity':
        return 1, 512 if setup.cuda else 256
    if check == 'compile':  # dynamo's work does not grow with the input
        return 2, 512 if setup.cuda else 256
    return (4, 1024) if setup.cuda else (2, 256)


def images(batch: int, side: int, device: torch.device, seed: int = 0) -> Tensor:
    return torch.randn(batch, 3, side, side, generator=torch.Generator().manual_seed(seed)).to(device)


def train_loss(outs: Any) -> Tensor:
    """The outputs' mean squares and the aux losses: a loss that reaches every parameter."""
    return sum(o.float().square().mean() for o in outs) + sum(
        outs.stats.aux_losses.values(), torch.zeros((), device=outs[0].device)
    )


def amp(setup: Setup) -> Any:
    """The recipes' AMP on a GPU: fp16 autocast (mmengine's AmpOptimWrapper's default); the CPU dry mode runs fp32."""
    return torch.autocast('cuda', dtype=torch.float16) if setup.cuda else contextlib.nullcontext()


# ---- parity ----------------------------------------------------------------------------------------------------------
class Run(NamedTuple):
    """A forward + backward in eval mode (no randomness): outputs, routing decisions and router gradients, on CPU."""

    outs: list[Tensor]
    routing: dict[str, Tensor]
    grads: dict[str, Tensor]


def routing(stats: Any) -> dict[str, Tensor]:
    """The decisions a forward reports: SR-ViT's mixture weights, reViT's gates, Edge-RecViT's depths, MoR-ViT's
    recursions (token maps and the gate table)."""
    out = {k: v for k, v in stats.token_maps.items() if k != 'confidence'}
    out.update({k: v for k, v in stats.tables.items() if k == 'gates'})
    return {k: v.detach().float().cpu() for k, v in out.items()}


def run_once(model: nn.Module, x: Tensor, dtype: torch.dtype | None) -> Run:
    model.eval().zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        outs = model(x)
    gen = torch.Generator().manual_seed(7)
    weights = [torch.randn(o.shape, generator=gen).to(o.device) for o in outs]
    sum((o.float() * w).mean() for o, w in zip(outs, weights)).backward()
    grads = {n: p.grad.float().cpu() for n, p in model.named_parameters() if p.grad is not None and _is_router(n)}
    return Run([o.detach().float().cpu() for o in outs], routing(outs.stats), grads)


def _is_router(name: str) -> bool:
    return 'router' in name or 'ranker' in name


def compare(got: Run, ref: Run) -> dict[str, float]:
    """Outputs: the 90th percentile over positions of the relative error of the feature vector (robust to the few
    tokens whose routing flips on a near-tie); decisions: the share equal (whole numbers: depths, recursions, hard
    mixtures) or the largest difference (weights, gates); router gradients: the relative L2 error of all of them."""

    def per_position(a: Tensor, b: Tensor) -> Tensor:  # (B, C, h, w) -> (B * h * w,)
        return ((a - b).norm(dim=1) / b.norm(dim=1).clamp_min(1e-30)).flatten()

    errors = torch.cat([per_position(a, b) for a, b in zip(got.outs, ref.outs)])
    found = {'outputs p90': float(errors.quantile(0.9))}
    whole = [k for k, v in ref.routing.items() if torch.equal(v, v.round()) and k != 'gates']
    if whole:
        found['decisions equal'] = min(float((got.routing[k] == ref.routing[k]).float().mean()) for k in whole)
    weights = [k for k in ref.routing if k not in whole]
    if weights:
        found['weights diff'] = max(float((got.routing[k] - ref.routing[k]).abs().max()) for k in weights)
    if ref.grads:
        a, b = (torch.cat([g[n].flatten() for n in sorted(ref.grads)]) for g in (got.grads, ref.grads))
        found['router grads'] = float((a - b).norm() / b.norm().clamp_min(1e-30))
    return found


# (outputs p90 <=, decisions equal >=, weights diff <=, router grads <=): the same fp32 arithmetic on two devices (only
# the order of sums differs), and autocast against fp32. The CPU's bf16 autocast measured at most outputs p90 0.0056,
# decisions 0.996, router grads 0.034 over the cases (`bash scripts/gpu_check.sh --cpu --only parity`, S at 256² and
# --quick, 2026-12-06); fp16 keeps 3 more mantissa bits.
TOLERANCES = {'fp32': (1e-4, 0.99, 1e-3, 1e-3), 'autocast': (3e-2, 0.9, 2e-2, 0.1)}


def parity_result(case: str, found: dict[str, float], kind: str) -> Result:
    limits = dict(zip(('outputs p90', 'decisions equal', 'weights diff', 'router grads'), TOLERANCES[kind]))
    ok = all(v >= limits[k] if k == 'decisions equal' else v <= limits[k] for k, v in found.items())
    sign = {k: '>=' if k == 'decisions equal' else '<=' for k in limits}
    return Result(
        'parity',
        case,
        ', '.join(f'{k} {v:.3g}' for k, v in found.items()),
        ', '.join(f'{k} {sign[k]} {limits[k]:g}' for k in found),
        ok,
    )


def parity(setup: Setup) -> Iterator[Result]:
    """GPU fp32 (TF32 off) vs CPU fp32, and bf16 / fp16 autocast vs fp32 on the device (CPU: bf16 only)."""
    batch, side = input_size(setup, 'parity')
    for case in CASES:
        yield from guarded('parity', case.name, lambda case=case: _parity(case, setup, batch, side))


def _parity(case: Case, setup: Setup, batch: int, side: int) -> Iterator[Result]:
    cpu = Setup(torch.device('cpu'), setup.quick, setup.work)
    model = model_case(case, cpu, with_cp=False)
    x = images(batch, side, torch.device('cpu'))
    ref = run_once(model, x, None)
    if setup.cuda:
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            dev = copy.deepcopy(model).to(setup.device)
            fp32 = run_once(dev, x.to(setup.device), None)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32
        yield parity_result(f'{case.name} cuda fp32 vs cpu fp32', compare(fp32, ref), 'fp32')
        for dtype in (torch.bfloat16, torch.float16):
            got = run_once(dev, x.to(setup.device), dtype)
            yield parity_result(f'{case.name} cuda {str(dtype)[6:]} vs fp32', compare(got, fp32), 'autocast')
    else:
        yield parity_result(
            f'{case.name} cpu bf16 vs fp32', compare(run_once(model, x, torch.bfloat16), ref), 'autocast'
        )
        yield skipped('parity', f'{case.name} cuda vs cpu', 'needs CUDA')


# ---- router_tf32 -----------------------------------------------------------------------------------------------------
def router_tf32(setup: Setup) -> Iterator[Result]:
    """Every router product with reduced-precision fp32 products allowed (TF32 on CUDA, as TF32Hook sets; oneDNN's
    bf16 on CPU) against fp64 on the same inputs; a plain `F.linear` of the same shown for contrast."""
    if setup.cuda:
        flag, value = (torch.backends.cuda.matmul, 'allow_tf32'), True
    elif torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported():
        flag, value = (torch.backends.mkldnn.matmul, 'fp32_precision'), 'bf16'
    else:
        yield skipped('router_tf32', 'all', 'no reduced-precision fp32 products on this CPU (oneDNN bf16)')
        return
    for case in CASES:
        if case.name in ('PlainViT', 'NaiveRecursiveViT'):
            continue
        yield from guarded('router_tf32', case.name, lambda case=case: [_router_tf32(case, setup, flag, value)])


def _router_tf32(case: Case, setup: Setup, flag: tuple[Any, str], value: Any) -> Result:
    model = model_case(case, setup).eval()
    seen: list[tuple[Tensor, RouterLinear, Tensor]] = []
    hooks = [
        m.register_forward_hook(lambda mod, inp, out: seen.append((inp[0].detach().clone(), mod, out.detach().clone())))
        for m in model.modules()
        if isinstance(m, RouterLinear)
    ]
    before = getattr(*flag)
    setattr(*flag, value)
    try:
        with torch.no_grad():
            model(images(*input_size(setup, 'router_tf32'), setup.device))
            plain = [F.linear(x.float(), m.weight.float()) for x, m, _ in seen]  # no bias: the products' own error
    finally:
        setattr(*flag, before)
        for hook in hooks:
            hook.remove()
    worst = plain_worst = 0.0
    for (x, m, out), product in zip(seen, plain):
        ref = F.linear(x.double(), m.weight.double(), None if m.bias is None else m.bias.double())
        worst = max(worst, float((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)))
        ref = F.linear(x.double(), m.weight.double())
        plain_worst = max(plain_worst, float((product.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)))
    measured = f'{worst:.2g} over {len(seen)} products (a plain F.linear: {plain_worst:.2g})'
    return Result('router_tf32', case.name, measured, '<= 1e-05', worst <= 1e-5)


# ---- sync --------------------------------------------------------------------------------------------------------
def cuda_syncs(fn: Callable[[], Any]) -> tuple[int, str]:
    """Syncs `fn` makes, counted by `torch.cuda.set_sync_debug_mode('warn')`: one warning per sync, where 'error'
    would raise at the first (the same hooks)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        torch.cuda.set_sync_debug_mode('warn')
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode('default')
    where = [f'{Path(w.filename).name}:{w.lineno}' for w in caught if 'synchronizing CUDA operation' in str(w.message)]
    return len(where), (f' (first at {where[0]})' if where else '')


def cpu_syncs(fn: Callable[[], Any]) -> tuple[int, str]:
    """Syncs `fn` makes, counted by `HostSyncCounter`, its uploads among them (from pageable memory a GPU syncs)."""
    with HostSyncCounter() as counter:
        fn()
    uploads = f', uploads x{counter.uploads}' if counter.uploads else ''
    return counter.syncs + counter.uploads, counter.summary()[len(str(counter.syncs)) :] + uploads


def sync(setup: Setup) -> Iterator[Result]:
    """Host syncs in a training forward + backward (AMP; after two warm-up iterations, --quick one) and an eval
    forward: none,
    one in the evals whose shapes follow the data (`DATA_DEPENDENT_EVAL`)."""
    count = cuda_syncs if setup.cuda else cpu_syncs
    for case in CASES:
        yield from guarded('sync', case.name, lambda case=case: _sync(case, setup, count))


def _sync(case: Case, setup: Setup, count: Callable[[Callable[[], Any]], tuple[int, str]]) -> Iterator[Result]:
    model = model_case(case, setup)
    x = images(*input_size(setup, 'sync'), setup.device)

    def train_step() -> None:
        with amp(setup):
            loss = train_loss(model(x))
        loss.backward()

    def eval_step() -> None:
        with torch.no_grad(), amp(setup):
            model(x)

    model.train()
    for _ in range(1 if setup.quick else 2):
        train_step()
    n, what = count(train_step)
    yield Result('sync', f'{case.name} train', f'{n}{what}', '= 0', n == 0)
    model.eval()
    eval_step()
    n, what = count(eval_step)
    allowed = 1 if case.name in DATA_DEPENDENT_EVAL else 0
    yield Result('sync', f'{case.name} eval', f'{n}{what}', f'<= {allowed}', n <= allowed)


# ---- attention ------------------------------------------------------------------------------------------------------
FUSED = ('flash', 'efficient', 'cudnn')  # SDPA's fused kernels (CPU: `_scaled_dot_product_flash_attention_for_cpu`)


class _Kernels(TorchDispatchMode):
    """The SDPA kernels dispatched (the math fallback dispatches none: its products show as matmuls)."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if 'scaled_dot_product' in name and 'backward' not in name:
            kind = next((k for k in FUSED if k in name), name)
            self.kernels[kind] = self.kernels.get(kind, 0) + 1
        return func(*args, **(kwargs or {}))


class _Calls(TorchFunctionMode):
    """SDPA calls, and those whose mask needs a gradient (rel-pos biases in training), which the CPU's flash kernel
    does not take (the math path runs them there; CUDA's memory-efficient kernel takes them)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = self.mask_grads = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            mask = kwargs.get('attn_mask', args[3] if len(args) > 3 else None)
            self.calls += 1
            self.mask_grads += isinstance(mask, Tensor) and mask.requires_grad
        return func(*args, **kwargs)


def attention(setup: Setup) -> Iterator[Result]:
    """Every SDPA call of a training and an eval forward (AMP on a GPU) runs a fused kernel (flash, memory-efficient,
    cuDNN), not the math path: on the dense path (global attention, no rel-pos) and as the recipe configures it
    (windows, rel-pos biases as a float mask; on the CPU those with a mask gradient run the math path)."""
    for case in CASES:
        for path, overrides in (('dense', dict(window_size=0, use_rel_pos=False)), ('recipe', {})):
            yield from guarded(
                'attention', f'{case.name} {path}', lambda c=case, o=overrides, p=path: [_attention(c, setup, p, o)]
            )


def _attention(case: Case, setup: Setup, path: str, overrides: dict[str, Any]) -> Result:
    model = model_case(case, setup, **overrides)
    x = images(*input_size(setup, 'attention'), setup.device)
    with _Calls() as calls, _Kernels() as kernels:
        for train in (True, False):
            with torch.set_grad_enabled(train), amp(setup):
                model.train(train)(x)
    fused = sum(n for k, n in kernels.kernels.items() if k in FUSED)
    what = ', '.join(f'{k} {n}' for k, n in sorted(kernels.kernels.items()))
    expected = calls.calls - (0 if setup.cuda else calls.mask_grads)
    threshold = 'all fused' if expected == calls.calls else f'all but the {calls.mask_grads} with a mask gradient'
    measured = f'fused {fused} of {calls.calls} calls ({what})'
    return Result('attention', f'{case.name} {path}', measured, threshold, fused >= expected)
