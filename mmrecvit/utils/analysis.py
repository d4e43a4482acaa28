"""Shared by the analysis tools (issue 8): one config's model, one real image, and its complexity.

`tools/analysis_tools/get_flops.py`, `tools/analysis_tools/visualize_depth.py` and
`tools/misc/gen_metafile.py` all do the same first steps, written once here:

    load_config(path, cfg_options)   mmengine Config; `init_scope` selects mmdet or mmseg's registries
    build_model(cfg, checkpoint)     the detector/segmentor through that registry, eval mode, weights loaded
    default_image(scope)             a toy val image from data/ (written by `make_toy_data` if absent)
    prepare_inputs(model, cfg, img)  the config's test pipeline (or an exact --shape) + data preprocessor

and `count_complexity(model, data)` measures params and FLOPs.

FLOP convention: mmengine's (fvcore's) -- one multiply-accumulate counts as one FLOP, so these are
GMACs. Papers and `StepWork.flops` count 2 x MACs; `FLOP_CONVENTION` says so wherever we print.

How the count works (`count_complexity`):

* **Neck and heads**: mmengine's `FlopAnalyzer` traces the whole model in `mode='tensor'` (as
  mmdet's and mmseg's own `get_flops.py` do) with the backbone replaced by a replay of its outputs
  from a plain forward of the same image. The backbone is never traced there: token-adaptive
  forwards (data-dependent shapes) need not be traceable.
* **Backbone, outside its block applications** (patch embedding, routers, rankers, step
  transforms, a final norm): every top-level call of a backbone module that is not a block module
  (block modules = `backbone.layer_positions()`) is recorded in that forward and traced by
  mmengine on its recorded inputs. Arithmetic a backbone does in its own `forward` outside any
  child module (the token-adaptive engine's attention and key/value projections) belongs to its
  block applications.
* **Block applications**: from the statistics of that forward, one `StepWork` per application
  with the tokens it really processed, in mmengine's convention (`step_macs`: the matmuls of
  `StepWork.flops` / 2 and mmengine's 5 FLOPs per element of each affine LayerNorm). The *dense*
  count is the same formula with every token at every application. For a dense model both equal
  mmengine's own trace of the backbone (tested), which is also reported when the backbone traces.

A backbone that is not one of ours (no `stats`) is counted by mmengine alone.
"""
from __future__ import annotations

import copy
import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from mmrecvit.models.stats import StepWork

REPO = Path(__file__).resolve().parents[2]
FLOP_CONVENTION = ('FLOPs in mmengine/fvcore convention: 1 multiply-accumulate = 1 FLOP (GFLOPs = GMACs); '
                   'papers and StepWork.flops count 2 x MACs (multiply by 2 to compare)')
# mmengine's `aten::layer_norm` handle: 5 FLOPs per element with an affine transform.
LAYER_NORM_FLOPS_PER_ELEMENT = 5
# Toy val image each framework's default input comes from (kind for `make_toy_data`, path under data/).
TOY_IMAGES = {
    'mmdet': ('coco', 'toy_coco/val2017/000001000001.jpg'),
    'mmseg': ('ade', 'toy_ade/ADEChallengeData2016/images/validation/ADE_val_00000001.jpg'),
}
SCOPES = tuple(TOY_IMAGES)


# ---- config, model, image -----------------------------------------------------------------------
def load_config(path: str | Path, cfg_options: dict | None = None) -> Any:
    """An mmengine `Config` from a file, with `--cfg-options`-style overrides merged in."""
    from mmengine.config import Config

    if not Path(path).is_file():
        raise FileNotFoundError(f'config file {str(path)!r} not found')
    cfg = Config.fromfile(str(path))
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    if 'model' not in cfg:
        raise ValueError(f'config {str(path)!r} has no model')
    return cfg


def shape_arg(parser: Any, values: Sequence[int] | None) -> tuple[int, int] | None:
    """A tool's `--shape H [W]` -> (H, W) (None when not given); `parser.error` for other lengths."""
    if values is None:
        return None
    if len(values) not in (1, 2):
        parser.error(f'--shape takes H or H W, got {len(values)} numbers')
    return values[0], values[-1]


def init_scope(cfg: Any) -> str:
    """Import mmrecvit (registration) and make the config's framework the default registry scope."""
    from mmengine.registry import init_default_scope

    import mmrecvit  # noqa: F401  (compat fixes + registration)

    scope = cfg.get('default_scope')
    if scope not in SCOPES:
        raise ValueError(f"config has default_scope={scope!r}; the analysis tools need one of {list(SCOPES)}")
    importlib.import_module(scope)
    init_default_scope(scope)
    return scope


def is_recvit_backbone(module: Any) -> bool:
    """One of our backbones: it reports statistics and layer positions (duck-typed, no class names)."""
    return hasattr(module, 'stats') and callable(getattr(module, 'layer_positions', None))


def load_weights(model: nn.Module, checkpoint: str) -> str:
    """Load `checkpoint` strictly; returns what was loaded, in words.

    A checkpoint of the whole model (keys `backbone.*`, e.g. from `tools/train.py`) goes through
    mmengine's loader (strict); a backbone-only or timm/DeiT checkpoint through the backbone's own
    filter (`mmrecvit.models.checkpoint.load_pretrained`, strict, key maps and pos_embed resampling).
    """
    from mmengine.runner import load_checkpoint

    from mmrecvit.models.checkpoint import load_pretrained, read_checkpoint

    keys = read_checkpoint(checkpoint)
    if any(k.startswith('backbone.') for k in keys):
        load_checkpoint(model, checkpoint, map_location='cpu', strict=True, logger='silent')
        return f'whole model from {checkpoint}'
    backbone = getattr(model, 'backbone', None)
    if backbone is None:
        raise ValueError(f'{checkpoint!r} has no backbone.* keys and the model has no backbone to load it into')
    load_pretrained(backbone, checkpoint)
    return f'backbone only from {checkpoint} (neck and heads randomly initialised)'


def build_model(cfg: Any, checkpoint: str | None = None, seed: int | None = 0) -> tuple[nn.Module, str]:
    """The config's detector/segmentor through mmdet's/mmseg's registry, in eval mode.

    `checkpoint`: a file (see `load_weights`), or None for the weights the modules initialise
    themselves with (random; the config's `init_cfg`, e.g. a DeiT file, is *not* loaded).
    `seed`: torch's seed before building, so random weights (and the routing of a random ranker)
    are the same in every tool (None: leave the generator alone).
    Returns the model and a description of its weights.
    """
    if seed is not None:
        torch.manual_seed(seed)
    scope = init_scope(cfg)
    registry = importlib.import_module(f'{scope}.registry')
    model_cfg = copy.deepcopy(cfg.model)
    if scope == 'mmseg':
        model_cfg.pop('pretrained', None)  # the backbone's init_cfg says what to load
    model = registry.MODELS.build(model_cfg)
    if checkpoint is None:
        weights = f'random initialisation (seed {seed}, no checkpoint)'
    else:
        weights = load_weights(model, checkpoint)
    return model.eval(), weights


def default_image(scope: str, data_root: str | Path | None = None) -> Path:
    """The framework's toy val image; writes the toy set with `make_toy_data` (default arguments,
    as `tools/misc/make_toy_data.py`) when it is missing."""
    if scope not in TOY_IMAGES:
        raise ValueError(f'no toy image for scope {scope!r}; allowed: {list(TOY_IMAGES)}')
    kind, rel = TOY_IMAGES[scope]
    root = Path(data_root) if data_root is not None else REPO / 'data'
    path = root / rel
    if not path.is_file():
        from mmrecvit.datasets import make_toy_data

        make_toy_data(root, which=[kind], progress=False)
        if not path.is_file():
            raise FileNotFoundError(f'make_toy_data did not write {path}')
    return path


def inference_pipeline(cfg: Any, shape: Sequence[int] | None = None) -> list[dict]:
    """The config's test pipeline for an unannotated image file.

    Annotation loading is dropped. With `shape` (H, W) every resize is replaced by one exact
    resize to H x W (no aspect ratio kept), so the model input is H x W before its preprocessor pads.
    """
    if cfg.get('test_dataloader') is not None and 'pipeline' in cfg.test_dataloader.get('dataset', {}):
        pipeline = copy.deepcopy(cfg.test_dataloader.dataset.pipeline)
    elif cfg.get('test_pipeline') is not None:
        pipeline = copy.deepcopy(cfg.test_pipeline)
    else:
        raise ValueError('the config has neither test_dataloader.dataset.pipeline nor test_pipeline')
    pipeline = [dict(t) for t in pipeline if 'LoadAnnotations' not in str(t.get('type', ''))]
    if shape is not None:
        H, W = (int(v) for v in shape)
        pipeline = [t for t in pipeline if 'Resize' not in str(t.get('type', ''))]
        load = next((i for i, t in enumerate(pipeline) if 'LoadImage' in str(t.get('type', ''))), -1)
        pipeline.insert(load + 1, dict(type='Resize', scale=(W, H), keep_ratio=False))
    return pipeline


def prepare_inputs(model: nn.Module, cfg: Any, image: str | Path, shape: Sequence[int] | None = None) -> dict:
    """One image through the test pipeline and the model's data preprocessor (batch of 1).

    Returns the preprocessor's dict (`inputs` (1, 3, H, W) normalised and padded, `data_samples`)
    plus `image` (the pipeline's output image, RGB uint8 (H, W, 3), for drawing).
    """
    from mmengine.dataset import Compose, pseudo_collate

    if not Path(image).is_file():
        raise FileNotFoundError(f'image {str(image)!r} not found')
    results = Compose(inference_pipeline(cfg, shape))(dict(img_path=str(image), img_id=0))
    batch = pseudo_collate([results])
    with torch.no_grad():
        data = model.data_preprocessor(batch, False)
    img = results['inputs']  # (3, H, W) uint8, BGR as `LoadImageFromFile` reads it
    data['image'] = img.flip(0).permute(1, 2, 0).numpy()
    return data


def backbone_of(model: nn.Module) -> nn.Module | None:
    return getattr(model, 'backbone', None)


def forward_backbone(model: nn.Module, data: dict) -> nn.Module:
    """Run only the backbone on the prepared inputs (no grad), for its statistics; returns it."""
    backbone = backbone_of(model)
    if backbone is None:
        raise ValueError(f'{type(model).__name__} has no backbone')
    with torch.no_grad():
        backbone(data['inputs'])
    return backbone


# ---- FLOP counting -----------------------------------------------------------------------------
def sdpa_flop_jit(inputs: list[Any], outputs: list[Any]) -> int:
    """mmengine handle for `aten::scaled_dot_product_attention` (mmengine 0.10 has none):
    q @ k^T and attn @ v, i.e. B*h*Nq*Nk*(d_k + d_v) multiply-accumulates."""
    from mmengine.analysis.jit_handles import get_shape

    q, k, v = (get_shape(t) for t in inputs[:3])
    return math.prod(q[:-1]) * k[-2] * (q[-1] + v[-1])


def flop_analyzer(module: nn.Module, inputs: tuple) -> Any:
    """mmengine's `FlopAnalyzer` with the SDPA handle, quiet (unsupported elementwise ops are not FLOPs here)."""
    from mmengine.analysis import FlopAnalyzer

    analyzer = FlopAnalyzer(module, inputs).set_op_handle('aten::scaled_dot_product_attention', sdpa_flop_jit)
    return analyzer.unsupported_ops_warnings(False).uncalled_modules_warnings(False).tracer_warnings('none')


def step_macs(step: Any, dim: int) -> float:
    """One block application in mmengine's convention: `StepWork.flops` / 2 plus the LayerNorms
    (norm1 on queried and newly cached tokens, norm2 on queried tokens; 5 per element)."""
    norms = LAYER_NORM_FLOPS_PER_ELEMENT * dim * (2 * step.queries + step.new_kv)
    return float(step.flops(dim)) / 2 + float(norms)


@dataclass
class StepCount:
    """One block application: tokens (per image) and FLOPs (mmengine convention)."""

    queries: float
    keys: float
    new_kv: float
    flops: float
    dense_flops: float


@dataclass
class BackboneCount:
    """The backbone's count (see the module docstring); FLOPs per image, mmengine convention."""

    name: str
    params: int
    tokens: int
    grid: tuple[int, int]
    other: dict[str, float]          # non-block modules by top-level child (traced on their recorded inputs)
    steps: list[StepCount]
    traced: float | None = None      # mmengine's trace of the whole backbone, if it traces
    trace_error: str | None = None
    analytic: float | None = None    # the backbone's own `analytic_flops()` / 2, if it has one

    @property
    def other_flops(self) -> float:
        return sum(self.other.values())

    @property
    def flops(self) -> float:
        """Active tokens: what the forward really computed."""
        return self.other_flops + sum(s.flops for s in self.steps)

    @property
    def dense_flops(self) -> float:
        """Every token through every block application."""
        return self.other_flops + sum(s.dense_flops for s in self.steps)


@dataclass
class ComplexityReport:
    """Params and FLOPs (per image, mmengine convention) of a model on one input."""

    model: str
    input_shape: tuple[int, ...]                   # the model input after the preprocessor, (1, 3, H, W)
    params: int
    rest: dict[str, float] = field(default_factory=dict)  # neck/heads by top-level module (traced)
    rest_flops: float = 0.0                        # everything but the backbone (traced)
    backbone: BackboneCount | None = None
    backbone_traced: float | None = None           # backbone by mmengine, for backbones not ours
    backbone_params: int = 0

    @property
    def backbone_flops(self) -> float:
        return self.backbone.flops if self.backbone is not None else float(self.backbone_traced or 0.0)

    @property
    def backbone_dense_flops(self) -> float:
        return self.backbone.dense_flops if self.backbone is not None else float(self.backbone_traced or 0.0)

    @property
    def flops(self) -> float:
        return self.rest_flops + self.backbone_flops

    @property
    def dense_flops(self) -> float:
        return self.rest_flops + self.backbone_dense_flops


def _block_modules(backbone: nn.Module) -> list[str]:
    return sorted(backbone.layer_positions())


def _other_modules(backbone: nn.Module) -> dict[str, nn.Module]:
    """Backbone submodules that are neither block modules nor inside or above one."""
    blocks = _block_modules(backbone)

    def related(name: str) -> bool:
        return any(name == b or name.startswith(b + '.') or b.startswith(name + '.') for b in blocks)

    return {name: m for name, m in backbone.named_modules() if name and not related(name)}


class _CallRecorder:
    """Records the top-level calls (module name, args, kwargs) of a set of modules during a forward."""

    def __init__(self, modules: dict[str, nn.Module]) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []
        self._depth = 0
        self._handles = []
        for name, m in modules.items():
            self._handles.append(m.register_forward_pre_hook(partial(self._enter, name), with_kwargs=True))
            self._handles.append(m.register_forward_hook(self._leave, always_call=True))

    def _enter(self, name: str, module: nn.Module, args: tuple, kwargs: dict) -> None:
        if self._depth == 0:
            self.calls.append((name, args, kwargs))
        self._depth += 1

    def _leave(self, *_: Any) -> None:
        self._depth -= 1

    def remove(self) -> None:
        for h in self._handles:
            h.remove()


def _traced_total(module: nn.Module, args: tuple, kwargs: dict | None = None) -> float:
    if kwargs:
        class _Bound(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = module

            def forward(self, *a: Any) -> Any:
                return self.inner(*a, **kwargs)

        module = _Bound()
    with torch.no_grad():
        return float(flop_analyzer(module, tuple(args)).total())


def _count_backbone(backbone: nn.Module, calls: list[tuple[str, tuple, dict]], backbone_input: Tensor,
                    trace_backbone: bool) -> BackboneCount:
    stats = backbone.stats
    if stats is None or not stats.steps:
        raise RuntimeError(f'{type(backbone).__name__} reported no statistics after its forward')
    dim = backbone.embed_dim
    grid = tuple(int(v) for v in stats.grid)
    tokens = grid[0] * grid[1] + int(getattr(backbone, 'num_prefix_tokens', 0))
    steps = []
    for s in stats.steps:
        dense = StepWork(queries=tokens, keys=tokens, mlp_hidden=s.mlp_hidden)
        steps.append(StepCount(queries=float(s.queries), keys=float(s.keys), new_kv=float(s.new_kv),
                               flops=step_macs(s, dim), dense_flops=step_macs(dense, dim)))
    analytic = backbone.analytic_flops() / 2 if callable(getattr(backbone, 'analytic_flops', None)) else None
    other: dict[str, float] = {}  # by the backbone's top-level child ('routers' sums routers.0, routers.1 ...)
    for name, args, kwargs in calls:
        top = name.split('.')[0]
        other[top] = other.get(top, 0.0) + _traced_total(backbone.get_submodule(name), args, kwargs)
    count = BackboneCount(name=type(backbone).__name__, params=sum(p.numel() for p in backbone.parameters()),
                          tokens=tokens, grid=grid, other=other, steps=steps, analytic=analytic)
    if trace_backbone:
        try:
            count.traced = _traced_total(backbone, (backbone_input,))
        except Exception as e:  # noqa: BLE001  (any tracer failure: report it, the count stands without it)
            count.trace_error = f'{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ""}'
    return count


def count_complexity(model: nn.Module, data: dict, trace_backbone: bool = True) -> ComplexityReport:
    """Params and FLOPs per image of `model` on the prepared `data` (see the module docstring).

    `trace_backbone`: also trace the whole backbone with mmengine (a cross-check column).
    """
    from mmengine.analysis import parameter_count

    inputs, samples = data['inputs'], data['data_samples']
    if inputs.shape[0] != 1:
        raise ValueError(f'count one image at a time, got a batch of {inputs.shape[0]}')
    params = parameter_count(model)
    backbone = backbone_of(model)
    report = ComplexityReport(model=type(model).__name__, input_shape=tuple(inputs.shape), params=params[''],
                              backbone_params=params.get('backbone', 0))
    ours = backbone is not None and is_recvit_backbone(backbone)
    recorded: dict[str, Any] = {}
    recorder = _CallRecorder(_other_modules(backbone)) if ours else None
    hook = backbone.register_forward_hook(lambda m, a, out: recorded.update(args=a, out=out)) if ours else None
    try:
        with torch.no_grad():
            model(inputs, samples, mode='tensor')
    finally:
        if recorder is not None:
            recorder.remove()
            hook.remove()

    original_forward = model.forward
    model.forward = partial(original_forward, data_samples=samples, mode='tensor')
    if ours:
        backbone.forward = lambda *_args, **_kwargs: recorded['out']  # replay: not traced here
    try:
        with torch.no_grad():
            analyzer = flop_analyzer(model, (inputs,))
            by_module = analyzer.by_module()
    finally:
        del model.forward
        if ours:
            del backbone.forward
    report.rest_flops = float(by_module[''] - by_module.get('backbone', 0))
    report.rest = {name: float(v) for name, v in by_module.items()
                   if name and '.' not in name and name != 'backbone' and v}
    if ours:
        report.backbone = _count_backbone(backbone, recorder.calls, recorded['args'][0], trace_backbone)
    elif backbone is not None:
        report.backbone_traced = float(by_module.get('backbone', 0))
    return report


# ---- formatting ---------------------------------------------------------------------------------
def giga(value: float | None, digits: int = 3) -> str:
    return '–' if value is None else f'{value / 1e9:.{digits}f}'


def mega(value: int | float) -> str:
    return f'{value / 1e6:.2f} M'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]

    def fmt(cells: Sequence[str]) -> str:
        return '| ' + ' | '.join(str(c).ljust(w) if a == 'l' else str(c).rjust(w)
                                 for c, w, a in zip(cells, widths, align)) + ' |'

    rule = '|' + '|'.join(':' + '-' * (w + 1) if a == 'l' else '-' * (w + 1) + ':' for w, a in zip(widths, align)) + '|'
    return [fmt(header), rule, *(fmt(r) for r in rows)]


def format_report(report: ComplexityReport, per_step: bool = False) -> str:
    """Markdown: the summary table (and with `per_step` one row per block application)."""
    bb = report.backbone
    rows = []
    if bb is not None:
        rows.append([f'backbone ({bb.name})', mega(bb.params), giga(bb.flops), giga(bb.dense_flops),
                     f'{bb.flops / bb.dense_flops:.3f}' if bb.dense_flops else '–'])
        rows.append([f'  block applications ({len(bb.steps)}, statistics)', '', giga(bb.flops - bb.other_flops),
                     giga(bb.dense_flops - bb.other_flops), ''])
        for name, value in bb.other.items():
            rows.append([f'  {name} (mmengine)', '', giga(value), giga(value), ''])
    else:
        rows.append(['backbone (mmengine)', mega(report.backbone_params), giga(report.backbone_flops),
                     giga(report.backbone_flops), ''])
    rows.append(['neck + heads (mmengine)', mega(report.params - report.backbone_params), giga(report.rest_flops),
                 giga(report.rest_flops), ''])
    for name, value in report.rest.items():
        rows.append([f'  {name}', '', giga(value), giga(value), ''])
    rows.append([f'whole model ({report.model})', mega(report.params), giga(report.flops), giga(report.dense_flops),
                 f'{report.flops / report.dense_flops:.3f}' if report.dense_flops else '–'])
    lines = _table(['part', 'params', 'GFLOPs (active tokens)', 'GFLOPs (dense)', 'active/dense'], rows,
                   'lrrrr')
    if bb is not None:
        notes = [f'- backbone grid {bb.grid[0]}x{bb.grid[1]}, {bb.tokens} tokens per application when dense']
        if bb.traced is not None:
            notes.append(f'- mmengine trace of the whole backbone: {giga(bb.traced)} GFLOPs '
                         '(counts the tokens the traced forward processed)')
        elif bb.trace_error:
            notes.append(f'- mmengine could not trace the backbone ({bb.trace_error}); the count above does not '
                         'need it')
        if bb.analytic is not None:
            notes.append(f"- the backbone's own analytic_flops(): {giga(bb.analytic)} GFLOPs (matmuls only)")
        lines += [''] + notes
    if per_step and bb is not None:
        step_rows = [[str(i), f'{s.queries:.1f}', f'{s.keys:.1f}', f'{s.new_kv:.1f}', giga(s.flops, 4),
                      giga(s.dense_flops, 4), f'{s.flops / s.dense_flops:.3f}' if s.dense_flops else '–']
                     for i, s in enumerate(bb.steps)]
        step_rows.append(['all', '', '', '', giga(sum(s.flops for s in bb.steps), 4),
                          giga(sum(s.dense_flops for s in bb.steps), 4), ''])
        lines += ['', 'Block applications (tokens per image; queries = tokens whose queries/MLP ran, keys = tokens '
                  'attended over, new kv = frozen tokens whose keys/values were projected):', '']
        lines += _table(['step', 'queries', 'keys', 'new kv', 'GFLOPs', 'dense GFLOPs', 'active/dense'], step_rows,
                        'rrrrrrr')
    return '\n'.join(lines) + '\n'
