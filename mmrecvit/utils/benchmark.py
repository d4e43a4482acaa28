"""Side-by-side latency, throughput, memory and FLOP-efficiency benchmark (issues 3 and 8).

The one harness behind every performance figure in the README. `tools/analysis_tools/benchmark.py`
is its command line; this module holds the parts, so tests and other tools can reuse them.

How a run measures (and why):

* **Models side by side, interleaved.** After a warm-up, every repeat runs each model once,
  round-robin, with the starting model rotated each repeat (`interleaved_order`). Load from other
  processes on a shared machine then hits all models alike instead of whichever ran last.
* **Latency** is the wall time of one forward (`time.perf_counter`; on CUDA bracketed by
  `torch.cuda.synchronize`), reported as median and spread (IQR, min-max); throughput, FLOP/s
  and ratios use the median (or, with `statistic='min'`, the fastest repeat: on a machine shared
  with other jobs the minimum estimates the undisturbed time better). Everything runs in `eval()`
  under `torch.inference_mode()`, in fp32 unless an autocast dtype is asked for, with a fixed
  thread count.
* **Peak memory** is measured in a separate, untimed forward: on CUDA from the allocator
  (`max_memory_allocated` minus what was allocated before), on the CPU with `PeakMemoryTracker`
  (tensor bookkeeping, which slows execution, hence the separate pass). Both count the tensors
  allocated during the forward, not the parameters or the input.
* **Analytic FLOPs** (2 x multiply-accumulates of matmuls and convolutions, per image) come from
  the statistics of a forward (`backbone.stats.block_flops(embed_dim)` plus the patch embedding),
  so token-adaptive models are charged only for the tokens each step really processed. A backbone
  that does work outside its block applications (step transforms, routers, rankers) may define
  `analytic_flops() -> float` (per image, for its last forward) and the harness uses that instead.
  timm ViTs get the same count for a dense ViT of their size, so the numbers compare.
* **Machine peak**: a square `torch.mm` (2048^3 on the CPU, 8192^3 on CUDA) in the same dtype. It
  runs best-of-5 at the start and end, and once in every interleaved round as one more "model", so
  it sees the same machine load as the models. Each model's achieved FLOP/s (analytic FLOPs at its
  median latency) is shown as a fraction of the matmul's median FLOP/s over the same rounds (min
  latency over the fastest matmul with `statistic='min'`): on a quiet machine that is the peak, on
  a shared one the load cancels to first order. The header prints the best and these values.
* **Ratios** against a reference model at the same batch: latency ratio (model/ref), speed-up
  (ref/model), ideal speed-up = FLOP ratio (ref FLOPs / model FLOPs), their quotient
  (speed-up / ideal; 1.0 means the FLOP saving became time saving) and memory ratio (model/ref).

Model specs (`parse_spec`), each optionally labelled `label=SPEC`:

* `ClassName(kw=literal, ...)`: a backbone of `mmrecvit.models.BACKBONES`;
* `timm:model_name(kw=literal, ...)`: a timm model, timed through
  `forward_intermediates(x, indices=<ends of 4 equal stages>, intermediates_only=True)` when it
  has one -- patch embedding, every block, 4 NCHW maps, no final norm or head: the same work as our
  backbones' `forward` -- else `forward_features`;
* `path/to/config.py(kw=literal, ...)`: the backbone of an mmengine config (kwargs override
  `cfg.model.backbone`), or with `whole=True` the whole detector/segmentor through mmdet's or
  mmseg's registry (`model(inputs, data_samples, mode='tensor')`; the data preprocessor runs once,
  untimed). mmdet/mmseg are imported only on that path.

Kwargs are parsed with `ast` and must be Python literals; nothing is evaluated.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import csv
import datetime
import importlib
import importlib.metadata
import math
import os
import platform
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from .memory import PeakMemoryTracker

DTYPES = {'fp32': torch.float32, 'bf16': torch.bfloat16, 'fp16': torch.float16}
STATISTICS = ('median', 'min')  # what throughput, FLOP/s and ratios are computed from
WHOLE_MODES = ('tensor', 'predict')


class SpecError(ValueError):
    """A model spec that cannot be parsed or built; the message names the spec."""


# ---- model specs --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    """One model given on the command line.

    text: the spec as typed (label included).
    label: the name used in tables and for `--reference`.
    kind: 'backbone' (a `BACKBONES` class), 'timm' or 'config'.
    target: the class name, the timm model name or the config path.
    kwargs: literal keyword arguments (constructor arguments, or overrides of the config's backbone).
    """

    text: str
    label: str
    kind: str
    target: str
    kwargs: dict[str, Any] = field(default_factory=dict)


# A label is anything before the first '=' that cannot belong to a call, a path or a timm name.
_LABEL = re.compile(r'^\s*([^=()\[\]{}:/\\\'"]+?)\s*=(?!=)(.*)$', re.S)


def parse_kwargs(args: str, spec: str) -> dict[str, Any]:
    """`"a=1, b=(2, 3)"` -> `{'a': 1, 'b': (2, 3)}`; only keyword arguments with literal values."""
    if not args.strip():
        return {}
    try:
        tree = ast.parse(f'_({args})', mode='eval')
    except SyntaxError as e:
        raise SpecError(f'model spec {spec!r}: cannot parse the arguments {args!r} ({e.msg})') from None
    call = tree.body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == '_'):
        raise SpecError(f'model spec {spec!r}: the arguments {args!r} are not one argument list')
    if call.args:
        raise SpecError(f'model spec {spec!r}: positional arguments are not allowed '
                        f'({ast.unparse(call.args[0])!r}); write name=value')
    kwargs = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise SpecError(f'model spec {spec!r}: **{ast.unparse(kw.value)} is not allowed; write name=value')
        try:
            kwargs[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise SpecError(f'model spec {spec!r}: the value of {kw.arg!r} must be a Python literal (number, '
                            'string, tuple, list, dict, set, True/False/None), got '
                            f'{ast.unparse(kw.value)!r}') from None
    return kwargs


def parse_spec(text: str) -> ModelSpec:
    """Parse `[label=]ClassName(...)`, `[label=]timm:name(...)` or `[label=]path/config.py(...)`."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError(f'model spec {text!r} is empty')
    label = None
    body = text.strip()
    m = _LABEL.match(body)
    if m:
        label, body = m.group(1).strip(), m.group(2).strip()
        if not body:
            raise SpecError(f'model spec {text!r}: nothing after the label {label!r}')
    args = ''
    if body.endswith(')'):
        i = body.find('(')
        if i <= 0:
            raise SpecError(f'model spec {text!r}: unbalanced parentheses')
        name, args = body[:i].strip(), body[i + 1:-1]
    else:
        name = body
    if any(c in name for c in '()'):
        raise SpecError(f'model spec {text!r}: unbalanced parentheses')
    kwargs = parse_kwargs(args, text)
    if name.startswith('timm:'):
        kind, target = 'timm', name[len('timm:'):].strip()
        if not target:
            raise SpecError(f'model spec {text!r}: timm: needs a model name, e.g. timm:vit_small_patch16_224')
    elif name.endswith('.py'):
        kind, target = 'config', name
    elif name.isidentifier():
        kind, target = 'backbone', name
    else:
        raise SpecError(f'model spec {text!r}: {name!r} is not a backbone class name, timm:NAME or a '
                        'config path ending in .py')
    if label is None:
        if kind == 'config':
            label = Path(target).stem + (f'({args.strip()})' if args.strip() else '')
        else:
            label = ' '.join(body.split())
    if kind == 'config' and 'whole' in kwargs and not isinstance(kwargs['whole'], bool):
        raise SpecError(f'model spec {text!r}: whole must be True or False, got {kwargs["whole"]!r}')
    return ModelSpec(text=text, label=label, kind=kind, target=target, kwargs=kwargs)


def parse_specs(texts: Sequence[str]) -> list[ModelSpec]:
    """Parse all specs; labels must be unique."""
    specs = [parse_spec(t) for t in texts]
    seen: dict[str, str] = {}
    for s in specs:
        if s.label in seen:
            raise SpecError(f'model specs {seen[s.label]!r} and {s.text!r} have the same label {s.label!r}; '
                            'name them with label=SPEC')
        seen[s.label] = s.text
    return specs


# ---- analytic FLOPs -----------------------------------------------------------------------------
def conv_flops(conv: nn.Conv2d, out_hw: Sequence[int]) -> float:
    """FLOPs (2 x MACs, bias not counted) of a 2-d convolution producing an `out_hw` map, per image."""
    kh, kw = conv.kernel_size
    return 2.0 * (conv.in_channels // conv.groups) * kh * kw * conv.out_channels * out_hw[0] * out_hw[1]


def conv_out_hw(conv: nn.Conv2d, hw: Sequence[int]) -> tuple[int, int]:
    """Output size of `conv` for an input of `hw` pixels (PyTorch's formula)."""
    out = []
    for i in range(2):
        pad = conv.padding[i] if isinstance(conv.padding, tuple) else 0
        size = (hw[i] + 2 * pad - conv.dilation[i] * (conv.kernel_size[i] - 1) - 1) // conv.stride[i] + 1
        out.append(size)
    return out[0], out[1]


def backbone_flops(module: nn.Module) -> float | None:
    """Analytic FLOPs per image of the last forward of one of our backbones (None if unknown).

    `module.analytic_flops()` if the backbone defines it; else the block applications recorded in
    `module.stats` plus the patch embedding on `stats.grid`.
    """
    custom = getattr(module, 'analytic_flops', None)
    if callable(custom):
        return float(custom())
    stats, dim = getattr(module, 'stats', None), getattr(module, 'embed_dim', None)
    if stats is None or dim is None or not hasattr(stats, 'block_flops'):
        return None
    flops = float(stats.block_flops(dim))
    proj = getattr(getattr(module, 'patch_embed', None), 'proj', None)
    if isinstance(proj, nn.Conv2d):
        flops += conv_flops(proj, stats.grid)
    return flops


def dense_vit_flops(dim: int, depth: int, tokens: int, mlp_hidden: int, patch_conv: nn.Conv2d | None = None,
                    grid: Sequence[int] = (0, 0)) -> float:
    """The same analytic count for a dense ViT: `depth` blocks over all `tokens`, plus the patch conv."""
    from mmrecvit.models.stats import ForwardStats, StepWork

    stats = ForwardStats(steps=[StepWork(queries=tokens, keys=tokens, mlp_hidden=mlp_hidden)] * depth)
    flops = stats.block_flops(dim)
    if patch_conv is not None:
        flops += conv_flops(patch_conv, grid)
    return flops


def timm_vit_flops(model: nn.Module, hw: Sequence[int]) -> float | None:
    """Analytic FLOPs per image of a timm VisionTransformer-like model on `hw` input (None if not one)."""
    blocks = getattr(model, 'blocks', None)
    proj = getattr(getattr(model, 'patch_embed', None), 'proj', None)
    if not blocks or not isinstance(proj, nn.Conv2d) or not hasattr(model, 'embed_dim'):
        return None
    fc1 = getattr(getattr(blocks[0], 'mlp', None), 'fc1', None)
    if not isinstance(fc1, nn.Linear):
        return None
    grid = conv_out_hw(proj, hw)
    if getattr(model.patch_embed, 'dynamic_img_pad', False):
        p = proj.stride
        grid = (math.ceil(hw[0] / p[0]), math.ceil(hw[1] / p[1]))
    tokens = grid[0] * grid[1] + int(getattr(model, 'num_prefix_tokens', 0))
    return dense_vit_flops(model.embed_dim, len(blocks), tokens, fc1.out_features, proj, grid)


# ---- building models ----------------------------------------------------------------------------
@dataclass
class BenchModel:
    """A built model and how the harness runs it.

    prepare: shared image batch (B, 3, H, W) -> what `run` takes (called once per batch, untimed).
    run: one forward (the timed call).
    flops: analytic FLOPs per image of the last forward, or None.
    timed: what exactly is timed, in words (printed under the table).
    """

    spec: ModelSpec
    module: nn.Module
    prepare: Callable[[Tensor], Any]
    run: Callable[[Any], Any]
    flops: Callable[[], float | None]
    timed: str

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def num_params(self) -> int:
        return sum(p.numel() for p in self.module.parameters())


def _backbones() -> dict[str, type]:
    # Looked up at build time: the dict grows as backbones are added.
    from mmrecvit.models import BACKBONES

    return BACKBONES


def _build_our_backbone(spec: ModelSpec, name: str, kwargs: dict[str, Any]) -> nn.Module:
    table = _backbones()
    if name not in table:
        raise SpecError(f'model spec {spec.text!r}: unknown backbone {name!r}; registered: {sorted(table)}')
    try:
        return table[name](**kwargs)
    except (TypeError, ValueError) as e:
        raise SpecError(f'model spec {spec.text!r}: {name}(**{kwargs!r}) failed: {e}') from e


def _identity(x: Tensor) -> Tensor:
    return x


def _backbone_model(spec: ModelSpec, module: nn.Module, origin: str) -> BenchModel:
    return BenchModel(spec=spec, module=module, prepare=_identity, run=module, flops=lambda: backbone_flops(module),
                      timed=f'{origin}: `forward(images)`, i.e. all the maps it returns for its out_indices')


def build_timm(spec: ModelSpec, hw: Sequence[int]) -> BenchModel:
    """A timm model, timed on the work that matches our backbones (see the module docstring)."""
    import timm

    from mmrecvit.models.vit import stage_ends

    kwargs = dict(spec.kwargs)
    kwargs.setdefault('pretrained', False)
    kwargs.setdefault('num_classes', 0)
    created = ''
    try:
        if 'img_size' in kwargs:
            model = timm.create_model(spec.target, **kwargs)
        else:
            try:
                # pos_embed built for the benchmark size, as a timm user would create it (no resampling).
                model = timm.create_model(spec.target, img_size=tuple(hw), **kwargs)
                created = f'created with img_size={tuple(hw)}; '
            except TypeError:  # models without an img_size argument (convnets)
                model = timm.create_model(spec.target, **kwargs)
    except RuntimeError as e:  # timm: "Unknown model"
        raise SpecError(f'model spec {spec.text!r}: {e}') from e
    blocks = getattr(model, 'blocks', None)
    if hasattr(model, 'forward_intermediates') and blocks is not None and len(blocks) > 0:
        indices = sorted(set(stage_ends(len(blocks))))

        def run(x: Tensor) -> Any:
            return model.forward_intermediates(x, indices=indices, intermediates_only=True)

        timed = (f'timm `forward_intermediates(x, indices={indices}, intermediates_only=True)` ({created}patch '
                 f'embedding, all {len(blocks)} blocks, {len(indices)} NCHW maps, no final norm/head: the work of '
                 'our backbone forward)')
    else:
        run = model.forward_features
        timed = f'timm `forward_features(x)` ({created}no head)'
    return BenchModel(spec=spec, module=model, prepare=_identity, run=run,
                      flops=lambda: timm_vit_flops(model, hw), timed=timed)


def _strip_scope(type_name: Any) -> Any:
    # 'mmdet.PlainViT' -> 'PlainViT'
    return type_name.split('.')[-1] if isinstance(type_name, str) else type_name


def _registry_scope(cfg: Any, spec: ModelSpec) -> str:
    scope = cfg.get('default_scope')
    if scope not in ('mmdet', 'mmseg'):
        raise SpecError(f'model spec {spec.text!r}: the config has default_scope={scope!r}; '
                        "building through a registry needs 'mmdet' or 'mmseg'")
    try:
        importlib.import_module(scope)
    except ImportError as e:
        raise SpecError(f'model spec {spec.text!r}: building this model needs {scope}, which does not '
                        f'import here ({e})') from e
    from mmengine.registry import init_default_scope

    import mmrecvit  # noqa: F401  (registers our backbones and necks into mmdet/mmseg)

    init_default_scope(scope)
    return scope


def _build_whole(spec: ModelSpec, cfg: Any, kwargs: dict[str, Any], hw: Sequence[int], mode: str) -> BenchModel:
    """The whole detector/segmentor of `cfg` through mmdet's or mmseg's registry."""
    scope = _registry_scope(cfg, spec)
    registry = importlib.import_module(f'{scope}.registry')
    structures = importlib.import_module(f'{scope}.structures')
    sample_cls = structures.DetDataSample if scope == 'mmdet' else structures.SegDataSample
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.update(kwargs)
    # No init_weights(): nothing is loaded, random weights time the same.
    model = registry.MODELS.build(model_cfg)
    H, W = hw

    def prepare(images: Tensor) -> dict[str, Any]:
        # Images in 0..255 as a loader would give them; the model's own preprocessor normalises/pads.
        raw = (images * 40 + 128).clamp(0, 255).round().to(torch.uint8).cpu()
        meta = dict(img_shape=(H, W), ori_shape=(H, W), pad_shape=(H, W), scale_factor=(1.0, 1.0))
        data = dict(inputs=list(raw.unbind(0)), data_samples=[sample_cls(metainfo=meta) for _ in raw])
        return model.data_preprocessor(data, False)

    def run(data: dict[str, Any]) -> Any:
        return model(data['inputs'], data['data_samples'], mode=mode)

    return BenchModel(spec=spec, module=model, prepare=prepare, run=run, flops=lambda: None,
                      timed=f"whole {scope} model `{type(model).__name__}(inputs, data_samples, mode='{mode}')` "
                            '(data preprocessor untimed; FLOPs not counted)')


def build_config(spec: ModelSpec, hw: Sequence[int], whole: bool = False, whole_mode: str = 'tensor') -> BenchModel:
    """The backbone (or with `whole`, the whole model) of an mmengine config file."""
    from mmengine.config import Config

    path = Path(spec.target)
    if not path.is_file():
        raise SpecError(f'model spec {spec.text!r}: config file {spec.target!r} not found')
    cfg = Config.fromfile(str(path))
    kwargs = dict(spec.kwargs)
    whole = kwargs.pop('whole', whole)
    if 'model' not in cfg or 'backbone' not in cfg.model:
        raise SpecError(f'model spec {spec.text!r}: the config has no model.backbone')
    if whole:
        return _build_whole(spec, cfg, kwargs, hw, whole_mode)
    bb = dict(cfg.model.backbone.to_dict() if hasattr(cfg.model.backbone, 'to_dict') else cfg.model.backbone)
    bb.update(kwargs)
    name = _strip_scope(bb.pop('type', None))
    if name in _backbones():
        module = _build_our_backbone(spec, name, bb)
        return _backbone_model(spec, module, f'{name} from {path.name}')
    # A backbone of the frameworks (ResNet, Swin ...): through their registry.
    scope = _registry_scope(cfg, spec)
    registry = importlib.import_module(f'{scope}.registry')
    module = registry.MODELS.build(dict(type=name, **bb))
    return _backbone_model(spec, module, f'{scope} {name} from {path.name}')


def build_model(spec: ModelSpec, hw: Sequence[int], whole: bool = False, whole_mode: str = 'tensor') -> BenchModel:
    """Build one spec in eval mode (weights random: latency does not depend on them)."""
    if whole_mode not in WHOLE_MODES:
        raise ValueError(f'whole_mode must be one of {WHOLE_MODES}, got {whole_mode!r}')
    if spec.kind == 'backbone':
        bench = _backbone_model(spec, _build_our_backbone(spec, spec.target, spec.kwargs), spec.target)
    elif spec.kind == 'timm':
        bench = build_timm(spec, hw)
    elif spec.kind == 'config':
        bench = build_config(spec, hw, whole, whole_mode)
    else:
        raise SpecError(f'model spec {spec.text!r}: unknown kind {spec.kind!r}')
    bench.module.eval()
    return bench


# ---- measuring ----------------------------------------------------------------------------------
def interleaved_order(num_models: int, repeats: int, rotate: bool = True) -> list[int]:
    """Model index of each timed forward: each repeat runs every model once, round-robin.

    With `rotate`, repeat r starts at model r mod n, so no model always runs right after the same
    other one (cache and frequency effects spread evenly).
    """
    order = []
    for r in range(repeats):
        shift = r % num_models if rotate else 0
        order.extend((shift + i) % num_models for i in range(num_models))
    return order


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    xs = sorted(values)
    if not xs:
        raise ValueError('percentile of no values')
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def physical_cores() -> int:
    """Physical CPU cores available to this process (hyper-threads not counted)."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else (os.cpu_count() or 1)
    cores = set()
    try:
        phys = core = None
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            key, _, value = line.partition(':')
            key = key.strip()
            if key == 'physical id':
                phys = value.strip()
            elif key == 'core id':
                core = value.strip()
            elif not key and core is not None:
                cores.add((phys, core))
                phys = core = None
        if core is not None:
            cores.add((phys, core))
    except OSError:
        pass
    return max(1, min(available, len(cores) if cores else available))


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where available)."""
    with contextlib.suppress(OSError):
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            if line.startswith('model name'):
                return line.partition(':')[2].strip()
    return platform.processor() or platform.machine()


def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[Any], Any], inputs: Any, device: torch.device) -> float:
    """Seconds of one call, device work included."""
    _sync(device)
    t0 = time.perf_counter()
    fn(inputs)
    _sync(device)
    return time.perf_counter() - t0


def peak_memory(fn: Callable[[Any], Any], inputs: Any, device: torch.device) -> int:
    """Peak bytes of tensors allocated during one call (parameters and inputs not counted)."""
    if device.type == 'cuda':
        _sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn(inputs)
        _sync(device)
        return torch.cuda.max_memory_allocated(device) - base
    with PeakMemoryTracker() as tracker:
        fn(inputs)
    return tracker.peak_bytes


class MatmulProbe:
    """The machine's matmul throughput: each call runs one n x n x n `torch.mm` (2 n^3 FLOPs)."""

    def __init__(self, device: torch.device, dtype: torch.dtype = torch.float32, n: int = 2048) -> None:
        self.device, self.n = device, n
        self.flops = 2.0 * n ** 3
        self.a = torch.randn(n, n, device=device, dtype=dtype)
        self.b = torch.randn(n, n, device=device, dtype=dtype)
        self.out = torch.empty(n, n, device=device, dtype=dtype)

    def __call__(self, _: Any = None) -> None:
        torch.mm(self.a, self.b, out=self.out)

    def best(self, repeats: int = 5) -> float:
        """Best FLOP/s over `repeats` calls after one warm-up."""
        self()
        return self.flops / min(time_call(self, None, self.device) for _ in range(repeats))


def matmul_peak(device: torch.device, dtype: torch.dtype = torch.float32, n: int = 2048, repeats: int = 5) -> float:
    """Best FLOP/s of an n x n x n `torch.mm` over `repeats` calls after one warm-up."""
    return MatmulProbe(device, dtype, n).best(repeats)


@dataclass
class Row:
    """One model at one batch size: the measurements, then the ratios against the reference."""

    label: str
    batch: int
    samples_s: list[float]
    flops_per_image: float | None
    peak_bytes: int | None
    params: int
    matmul_flops: float | None = None  # matmul FLOP/s (same statistic) in the rounds that timed this row
    statistic: str = 'median'  # 'median' or 'min': the latency that throughput and ratios use
    latency_ratio: float | None = None
    speedup: float | None = None
    ideal_speedup: float | None = None
    quotient: float | None = None
    memory_ratio: float | None = None

    @property
    def median_s(self) -> float | None:
        return percentile(self.samples_s, 50) if self.samples_s else None

    @property
    def latency_s(self) -> float | None:
        """The latency throughput, FLOP/s and ratios use (`statistic` of the samples)."""
        if not self.samples_s:
            return None
        return min(self.samples_s) if self.statistic == 'min' else percentile(self.samples_s, 50)

    @property
    def iqr_s(self) -> float | None:
        return percentile(self.samples_s, 75) - percentile(self.samples_s, 25) if self.samples_s else None

    @property
    def images_per_s(self) -> float | None:
        lat = self.latency_s
        return self.batch / lat if lat else None

    @property
    def achieved_flops(self) -> float | None:
        """FLOP/s achieved at `latency_s`."""
        lat = self.latency_s
        return self.flops_per_image * self.batch / lat if lat and self.flops_per_image is not None else None

    @property
    def peak_fraction(self) -> float | None:
        """Achieved FLOP/s over the matmul's FLOP/s (same statistic) in the same rounds."""
        return _ratio(self.achieved_flops, self.matmul_flops)


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def add_ratios(rows: Iterable[Row], reference: str) -> None:
    """Fill each row's ratios against the reference model's row at the same batch size."""
    rows = list(rows)
    refs = {r.batch: r for r in rows if r.label == reference}
    for r in rows:
        ref = refs.get(r.batch)
        if ref is None:
            continue
        r.latency_ratio = _ratio(r.latency_s, ref.latency_s)
        r.speedup = _ratio(ref.latency_s, r.latency_s)
        r.ideal_speedup = _ratio(ref.flops_per_image, r.flops_per_image)
        r.quotient = _ratio(r.speedup, r.ideal_speedup)
        r.memory_ratio = _ratio(r.peak_bytes, ref.peak_bytes)


@dataclass
class BenchConfig:
    """How to run: see the command line's help for each field."""

    batches: Sequence[int] = (1,)
    hw: tuple[int, int] = (224, 224)
    device: str = 'cpu'
    threads: int | None = None
    dtype: str = 'fp32'
    warmup: int = 3
    repeats: int = 15
    memory: bool = True
    statistic: str = 'median'
    peak_size: int | None = None
    seed: int = 0
    progress: bool = True


@dataclass
class BenchResult:
    """Everything a report needs: environment, models, rows (ratios filled) and the machine peak."""

    env: dict[str, str]
    models: list[tuple[str, str, int]]  # (label, what is timed, parameters)
    rows: list[Row]
    reference: str
    peak_flops: float | None  # best matmul FLOP/s of the run
    config: BenchConfig
    command: str = ''


def _versions() -> str:
    parts = []
    for dist in ('torch', 'timm', 'mmengine', 'mmcv', 'mmdet', 'mmsegmentation'):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            parts.append(f'{dist} {importlib.metadata.version(dist)}')
    return ', '.join(parts)


def _git_commit() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=root, capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return 'unknown'
    return out.stdout.strip() or 'unknown'


def environment(config: BenchConfig, threads: int) -> dict[str, str]:
    """What a reader needs to reproduce the numbers."""
    device = torch.device(config.device)
    if device.type == 'cuda':
        dev = f'cuda ({torch.cuda.get_device_name(device)})'
    else:
        dev = f'cpu ({cpu_model()}, {physical_cores()} physical cores, {os.cpu_count()} logical)'
    env = {
        'date': datetime.datetime.now().astimezone().isoformat(timespec='seconds'),
        'device': dev,
        'threads': str(threads),
        'dtype': config.dtype if config.dtype == 'fp32' else f'autocast {config.dtype} (fp32 weights)',
        'input': f'{config.hw[0]}x{config.hw[1]}, batch {", ".join(map(str, config.batches))}',
        'repeats': f'{config.warmup} warm-up + {config.repeats} interleaved per model and batch',
        'software': f'Python {platform.python_version()}, {_versions()}, mmrecvit {_git_commit()}',
    }
    if hasattr(os, 'getloadavg'):
        env['load average at start'] = ', '.join(f'{v:.2f}' for v in os.getloadavg())
    return env


@contextlib.contextmanager
def _num_threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc='benchmark', unit='fwd', disable=not enabled, leave=False, dynamic_ncols=True)


def run_benchmark(models: Sequence[BenchModel], config: BenchConfig, reference: str | None = None) -> BenchResult:
    """Measure `models` side by side (see the module docstring); returns rows with ratios filled."""
    if not models:
        raise ValueError('no models to benchmark')
    labels = [m.label for m in models]
    reference = labels[0] if reference is None else reference
    if reference not in labels:
        raise ValueError(f'--reference {reference!r} is not one of the labels {labels}')
    if config.statistic not in STATISTICS:
        raise ValueError(f'statistic must be one of {STATISTICS}, got {config.statistic!r}')
    if config.dtype not in DTYPES:
        raise ValueError(f'dtype must be one of {list(DTYPES)}, got {config.dtype!r}')
    if config.repeats < 0 or config.warmup < 0:
        raise ValueError('repeats and warmup must be >= 0')
    if config.repeats == 0 and not config.memory:
        raise ValueError('nothing to measure: repeats is 0 and memory is off')
    device = torch.device(config.device)
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise ValueError('device cuda asked for, but torch sees no GPU')
    dtype = DTYPES[config.dtype]
    threads = config.threads or physical_cores()
    peak_n = config.peak_size or (8192 if device.type == 'cuda' else 2048)
    autocast = (torch.autocast(device.type, dtype=dtype) if dtype != torch.float32 else contextlib.nullcontext())
    n = len(models)
    per_batch = n * (config.warmup + int(config.memory)) + (n + 1) * config.repeats
    rows: list[Row] = []
    with _num_threads(threads):
        env = environment(config, threads)
        for m in models:
            m.module.to(device)
        gen = torch.Generator().manual_seed(config.seed)
        with torch.inference_mode(), _progress(per_batch * len(config.batches), config.progress) as bar:
            probe = MatmulProbe(device, dtype, peak_n)
            peak = probe.best()
            for batch in config.batches:
                images = torch.randn(batch, 3, *config.hw, generator=gen).to(device)
                inputs = [m.prepare(images) for m in models]
                samples: list[list[float]] = [[] for _ in range(n + 1)]  # the last one: the matmul
                peaks: list[int | None] = [None] * n
                with autocast:
                    for i, m in enumerate(models):
                        bar.set_postfix_str(f'warm-up {m.label} b{batch}')
                        for _ in range(config.warmup):
                            m.run(inputs[i])
                            bar.update()
                    bar.set_postfix_str(f'timing b{batch}')
                    for i in interleaved_order(n + 1, config.repeats):
                        fn, x = (probe, None) if i == n else (models[i].run, inputs[i])
                        samples[i].append(time_call(fn, x, device))
                        bar.update()
                    if config.memory:
                        for i, m in enumerate(models):
                            bar.set_postfix_str(f'memory {m.label} b{batch}')
                            peaks[i] = peak_memory(m.run, inputs[i], device)
                            bar.update()
                mm = samples[n]
                matmul = probe.flops / (min(mm) if config.statistic == 'min' else percentile(mm, 50)) if mm else None
                if samples[n]:
                    peak = max(peak, probe.flops / min(samples[n]))
                for i, m in enumerate(models):
                    rows.append(Row(label=m.label, batch=batch, samples_s=samples[i], flops_per_image=m.flops(),
                                    peak_bytes=peaks[i], params=m.num_params, matmul_flops=matmul,
                                    statistic=config.statistic))
            peak = max(peak, probe.best())
    if hasattr(os, 'getloadavg'):  # other processes' load is the main source of noise on a shared machine
        env['load average at end'] = ', '.join(f'{v:.2f}' for v in os.getloadavg())
    add_ratios(rows, reference)
    return BenchResult(env=env, models=[(m.label, m.timed, m.num_params) for m in models], rows=rows,
                       reference=reference, peak_flops=peak, config=config)


# ---- reporting ----------------------------------------------------------------------------------
def _fmt(value: float | None, digits: int = 2, scale: float = 1.0) -> str:
    return '–' if value is None else f'{value * scale:.{digits}f}'


def _ms(value: float | None) -> str:
    if value is None:
        return '–'
    ms = value * 1e3
    return f'{ms:.1f}' if ms >= 100 else f'{ms:.2f}'


def format_markdown(result: BenchResult) -> str:
    """The report: command, environment, one table (rows grouped by batch) and what was timed."""
    peak = result.peak_flops
    lines = []
    if result.command:
        lines += ['```', result.command, '```', '']
    for key, value in result.env.items():
        lines.append(f'- {key}: {value}')
    if peak is not None:
        n = result.config.peak_size or (8192 if result.config.device == 'cuda' else 2048)
        medians = {r.batch: r.matmul_flops for r in result.rows if r.matmul_flops is not None}
        stat = result.config.statistic
        during = f'; {"fastest" if stat == "min" else "median"} during the timing of ' + ', '.join(
            f'batch {b}: {v / 1e9:.1f}' for b, v in medians.items()) if medians else ''
        lines.append(f'- matmul ({result.config.dtype} {n}³ `torch.mm`): best {peak / 1e9:.1f} GFLOP/s{during} '
                     '(the % of matmul column divides by the latter)')
    lines.append(f'- reference for the ratios: **{result.reference}**')
    lines.append('')
    head = ['model', 'batch', f'latency ms ({result.config.statistic})', 'IQR ms', 'min–max ms', 'images/s',
            'GFLOPs/img', '% of matmul', 'peak mem MiB', 'params M', 'latency ratio', 'speed-up',
            'ideal speed-up (FLOP ratio)', 'quotient', 'memory ratio']
    lines.append('| ' + ' | '.join(head) + ' |')
    lines.append('|' + '|'.join(['---'] + ['---:'] * (len(head) - 1)) + '|')
    for r in result.rows:
        minmax = f'{_ms(min(r.samples_s))}–{_ms(max(r.samples_s))}' if r.samples_s else '–'
        mib = None if r.peak_bytes is None else r.peak_bytes / 2 ** 20
        cells = [r.label, str(r.batch), _ms(r.latency_s), _ms(r.iqr_s), minmax, _fmt(r.images_per_s, 1),
                 _fmt(r.flops_per_image, 2, 1e-9), _fmt(r.peak_fraction, 1, 100.0),
                 _fmt(mib, 1 if (mib or 0) >= 100 else 2), _fmt(r.params, 2, 1e-6),
                 _fmt(r.latency_ratio, 3), _fmt(r.speedup, 3), _fmt(r.ideal_speedup, 3), _fmt(r.quotient, 3),
                 _fmt(r.memory_ratio, 3)]
        lines.append('| ' + ' | '.join(c.replace('|', '\\|') for c in cells) + ' |')
    lines.append('')
    lines.append('Timed per model:')
    for label, timed, _ in result.models:
        lines.append(f'- **{label}**: {timed}')
    lines.append('')
    lines.append('Latency: wall time of one forward; peak mem: tensors allocated during one forward '
                 '(untimed pass; parameters and input not counted); GFLOPs: analytic, per image, only the '
                 'tokens each step processed; quotient = speed-up / ideal speed-up.')
    return '\n'.join(lines) + '\n'


CSV_FIELDS = ['label', 'batch', 'height', 'width', 'device', 'dtype', 'threads', 'statistic', 'latency_ms_median',
              'latency_ms_q25', 'latency_ms_q75', 'latency_ms_min', 'latency_ms_max', 'latency_ms_mean', 'n',
              'images_per_s', 'gflops_per_image', 'achieved_gflops_per_s', 'matmul_best_gflops_per_s',
              'matmul_median_gflops_per_s', 'peak_fraction', 'peak_mem_mib', 'params_m', 'reference',
              'latency_ratio', 'speedup', 'ideal_speedup', 'quotient', 'memory_ratio', 'date']


def csv_rows(result: BenchResult) -> list[dict[str, Any]]:
    """One dict per row, with every raw number (seconds converted to ms, bytes to MiB)."""
    out = []
    peak = result.peak_flops
    for r in result.rows:
        s = r.samples_s

        def ms(v: float | None) -> float | None:
            return None if v is None else v * 1e3

        achieved = r.achieved_flops
        out.append(dict(
            label=r.label, batch=r.batch, height=result.config.hw[0], width=result.config.hw[1],
            device=result.config.device, dtype=result.config.dtype, threads=result.env.get('threads'),
            statistic=r.statistic,
            latency_ms_median=ms(r.median_s), latency_ms_q25=ms(percentile(s, 25)) if s else None,
            latency_ms_q75=ms(percentile(s, 75)) if s else None, latency_ms_min=ms(min(s)) if s else None,
            latency_ms_max=ms(max(s)) if s else None, latency_ms_mean=ms(sum(s) / len(s)) if s else None,
            n=len(s), images_per_s=r.images_per_s,
            gflops_per_image=None if r.flops_per_image is None else r.flops_per_image / 1e9,
            achieved_gflops_per_s=None if achieved is None else achieved / 1e9,
            matmul_best_gflops_per_s=None if peak is None else peak / 1e9,
            matmul_median_gflops_per_s=None if r.matmul_flops is None else r.matmul_flops / 1e9,
            peak_fraction=r.peak_fraction,
            peak_mem_mib=None if r.peak_bytes is None else r.peak_bytes / 2 ** 20, params_m=r.params / 1e6,
            reference=result.reference, latency_ratio=r.latency_ratio, speedup=r.speedup,
            ideal_speedup=r.ideal_speedup, quotient=r.quotient, memory_ratio=r.memory_ratio,
            date=result.env.get('date')))
    return out


def write_csv(result: BenchResult, path: str | os.PathLike) -> None:
    """Write `csv_rows(result)` with a header (empty cells for numbers that do not apply)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open('w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in csv_rows(result):
            writer.writerow({k: '' if v is None else v for k, v in row.items()})


def result_dict(result: BenchResult) -> dict[str, Any]:
    """A JSON-friendly view (for tools that post-process runs)."""
    return dict(env=result.env, command=result.command, reference=result.reference, peak_flops=result.peak_flops,
                config=asdict(result.config), rows=csv_rows(result))
