"""Params and FLOPs of a whole detector/segmentor/classifier, in the one convention of `mmrecvit.models.flops`.

* **Backbone** (ours): its own analytic count, the `stats.work` of its forward's result -- what its forward really
  computed (block applications on the tokens they ran on, patch embedding, routers, rankers, step
  transforms, expert merges). The *dense* count replaces every block application by one over all
  tokens.
* **Neck and heads**: mmengine's `FlopAnalyzer` (the counter behind mmdet's and mmseg's
  `get_flops.py`) traces the model in `mode='tensor'` with the backbone replaced by a replay of its
  outputs, so a token-adaptive backbone never needs to be traceable. mmengine counts 1 MAC as one
  FLOP and also counts norms, upsampling and pooling; here those handles count 0 and the total is
  doubled, so its numbers are in our convention too (`flop_analyzer`).
* **Cross-check**: mmengine's trace of the whole backbone with the same handles. For a static
  backbone it equals the analytic count (tested); a token-adaptive one traces the tokens of the
  traced forward, or not at all.

A backbone that is not one of ours is counted by mmengine alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.analysis.jit_handles import get_shape
from torch import nn

from ..models import ViTBackbone
from ..models.flops import BlockWork, OpWork, Work, total_flops

FLOP_CONVENTION = (
    'FLOPs = 2 x multiply-accumulates of matmuls, attention and convolutions (norms and elementwise '
    'ops not counted); mmdet/mmseg get_flops print GMACs incl. norms (about half)'
)
# mmengine handles that count work outside matrix products: 0 here (the convention above).
NON_MATMUL_OPS = (
    'aten::layer_norm',
    'aten::group_norm',
    'aten::batch_norm',
    'aten::instance_norm',
    'aten::upsample_nearest2d',
    'aten::upsample_bilinear2d',
    'aten::adaptive_avg_pool2d',
    'aten::grid_sampler',
)


def _sdpa_macs(inputs: list[Any], outputs: list[Any]) -> int:
    """`aten::scaled_dot_product_attention` (mmengine 0.10 has no handle): q @ k^T and attn @ v."""
    q, k, v = (get_shape(t) for t in inputs[:3])
    return math.prod(q[:-1]) * k[-2] * (q[-1] + v[-1])


def _no_macs(inputs: list[Any], outputs: list[Any]) -> int:
    return 0


def flop_analyzer(module: nn.Module, inputs: tuple) -> FlopAnalyzer:
    """mmengine's `FlopAnalyzer` counting matrix products only (MACs), quiet."""
    analyzer = FlopAnalyzer(module, inputs).set_op_handle('aten::scaled_dot_product_attention', _sdpa_macs)
    analyzer.set_op_handle(**{op: _no_macs for op in NON_MATMUL_OPS})
    return analyzer.unsupported_ops_warnings(False).uncalled_modules_warnings(False).tracer_warnings('none')


def traced_flops(module: nn.Module, inputs: tuple) -> float:
    """FLOPs (our convention) of `module(*inputs)` by mmengine's trace."""
    with torch.no_grad():
        return 2.0 * float(flop_analyzer(module, inputs).total())


def dense_equivalent(work: Sequence[Work], tokens: int) -> list[Work]:
    """`work` with every block application over all `tokens` (and nothing projected for a cache)."""
    return [
        dataclasses.replace(w, queries=tokens, keys=tokens, new_kv=0.0, attn_pairs=None)
        if isinstance(w, BlockWork)
        else w
        for w in work
    ]


@dataclass
class BackboneCount:
    """Our backbone's analytic count on one image (FLOPs per image)."""

    name: str
    params: int
    grid: tuple[int, int]
    tokens: int
    work: list[Work]
    traced: float | None = None  # mmengine's trace of the whole backbone, if it traces
    trace_error: str | None = None

    @property
    def flops(self) -> float:
        """What the forward really computed."""
        return total_flops(self.work)

    @property
    def dense_flops(self) -> float:
        """Every token through every block application."""
        return total_flops(dense_equivalent(self.work, self.tokens))


@dataclass
class ComplexityReport:
    """Params and FLOPs (per image) of a model on one input."""

    model: str
    input_shape: tuple[int, ...]  # the model input after the preprocessor, (1, 3, H, W)
    params: int
    backbone_params: int = 0
    rest: dict[str, float] = field(default_factory=dict)  # neck/heads by top-level module (traced)
    rest_flops: float = 0.0  # everything but the backbone (traced)
    backbone: BackboneCount | None = None
    backbone_traced: float | None = None  # backbone by mmengine, for backbones not ours

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


def _trace_error(e: Exception) -> str:
    return f'{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ""}'


def count_complexity(model: nn.Module, data: dict, trace_backbone: bool = True) -> ComplexityReport:
    """Params and FLOPs per image of `model` on the prepared `data` (see the module docstring).

    `trace_backbone`: also trace the whole backbone with mmengine (a cross-check column).
    """
    inputs, samples = data['inputs'], data['data_samples']
    if inputs.shape[0] != 1:
        raise ValueError(f'count one image at a time, got a batch of {inputs.shape[0]}')
    params = parameter_count(model)
    backbone = getattr(model, 'backbone', None)
    report = ComplexityReport(
        model=type(model).__name__,
        input_shape=tuple(inputs.shape),
        params=params[''],
        backbone_params=params.get('backbone', 0),
    )
    ours = isinstance(backbone, ViTBackbone)
    recorded: dict[str, Any] = {}
    if ours:
        hook = backbone.register_forward_hook(lambda m, a, out: recorded.update(args=a, out=out))
        try:
            with torch.no_grad():
                # Steady state: a first forward fills what a backbone caches across forwards (reViT's
                # merged experts), so the count is that of every later forward.
                model(inputs, samples, mode='tensor')
                model(inputs, samples, mode='tensor')
        finally:
            hook.remove()
        stats = recorded['out'].stats  # the statistics travel with the backbone's result
        tokens = stats.grid[0] * stats.grid[1] + backbone.num_prefix_tokens
        report.backbone = BackboneCount(
            name=type(backbone).__name__,
            params=report.backbone_params,
            grid=tuple(stats.grid),
            tokens=tokens,
            work=list(stats.work),
        )

    model.forward = partial(model.forward, data_samples=samples, mode='tensor')
    if ours:
        backbone.forward = lambda *_args, **_kwargs: recorded['out']  # replay: not traced here
    try:
        with torch.no_grad():
            by_module = flop_analyzer(model, (inputs,)).by_module()
    finally:
        del model.forward
        if ours:
            del backbone.forward
    report.rest_flops = 2.0 * float(by_module[''] - by_module.get('backbone', 0))
    report.rest = {
        name: 2.0 * float(v) for name, v in by_module.items() if name and '.' not in name and name != 'backbone' and v
    }
    if not ours:
        report.backbone_traced = 2.0 * float(by_module.get('backbone', 0)) if backbone is not None else None
    elif trace_backbone:
        try:
            report.backbone.traced = traced_flops(backbone, tuple(recorded['args']))
        except Exception as e:  # noqa: BLE001  (any tracer failure is reported; the count stands without it)
            report.backbone.trace_error = _trace_error(e)
    return report


# ---- formatting ---------------------------------------------------------------------------------
def giga(value: float | None, digits: int = 3) -> str:
    return '–' if value is None else f'{value / 1e9:.{digits}f}'


def mega(value: float) -> str:
    return f'{value / 1e6:.2f} M'


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """Aligned Markdown table lines; `align` has one 'l' or 'r' per column."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]

    def fmt(cells: Sequence[str]) -> str:
        return (
            '| '
            + ' | '.join(str(c).ljust(w) if a == 'l' else str(c).rjust(w) for c, w, a in zip(cells, widths, align))
            + ' |'
        )

    rule = '|' + '|'.join(':' + '-' * (w + 1) if a == 'l' else '-' * (w + 1) + ':' for w, a in zip(widths, align)) + '|'
    return [fmt(header), rule, *(fmt(r) for r in rows)]


def _ratio(a: float, b: float) -> str:
    return f'{a / b:.3f}' if b else '–'


def format_report(report: ComplexityReport, per_step: bool = False) -> str:
    """Markdown: the summary table (and with `per_step` one row per entry of the backbone's work)."""
    bb = report.backbone
    rows = []
    if bb is not None:
        rows.append(
            [
                f'backbone ({bb.name}, analytic)',
                mega(bb.params),
                giga(bb.flops),
                giga(bb.dense_flops),
                _ratio(bb.flops, bb.dense_flops),
            ]
        )
        blocks = [w for w in bb.work if isinstance(w, BlockWork)]
        dense = dense_equivalent(blocks, bb.tokens)
        rows.append(
            [f'  block applications ({len(blocks)})', '', giga(total_flops(blocks)), giga(total_flops(dense)), '']
        )
        ops: dict[str, float] = {}
        for w in bb.work:
            if isinstance(w, OpWork):
                ops[w.name.split('.')[0]] = ops.get(w.name.split('.')[0], 0.0) + w.flops
        rows += [[f'  {name}', '', giga(v), giga(v), ''] for name, v in ops.items()]
    else:
        rows.append(
            [
                'backbone (mmengine)',
                mega(report.backbone_params),
                giga(report.backbone_flops),
                giga(report.backbone_flops),
                '',
            ]
        )
    rows.append(
        [
            'neck + heads (mmengine)',
            mega(report.params - report.backbone_params),
            giga(report.rest_flops),
            giga(report.rest_flops),
            '',
        ]
    )
    rows += [[f'  {name}', '', giga(v), giga(v), ''] for name, v in report.rest.items()]
    rows.append(
        [
            f'whole model ({report.model})',
            mega(report.params),
            giga(report.flops),
            giga(report.dense_flops),
            _ratio(report.flops, report.dense_flops),
        ]
    )
    lines = markdown_table(['part', 'params', 'GFLOPs (work done)', 'GFLOPs (dense)', 'done/dense'], rows, 'lrrrr')
    if bb is not None:
        notes = [f'- backbone grid {bb.grid[0]}x{bb.grid[1]}, {bb.tokens} tokens per application when dense']
        if bb.traced is not None:
            notes.append(
                f'- mmengine trace of the whole backbone: {giga(bb.traced)} GFLOPs '
                '(the tokens the traced forward processed)'
            )
        elif bb.trace_error:
            notes.append(
                f'- mmengine could not trace the backbone ({bb.trace_error}); the count above does not need it'
            )
        lines += [''] + notes
    if per_step and bb is not None:
        step_rows = []
        for i, w in enumerate(bb.work):
            if isinstance(w, BlockWork):
                d = dense_equivalent([w], bb.tokens)[0]
                step_rows.append(
                    [
                        str(i),
                        'block',
                        f'{w.queries:.1f}',
                        f'{w.keys:.1f}',
                        f'{w.new_kv:.1f}',
                        giga(w.flops, 4),
                        giga(d.flops, 4),
                    ]
                )
            else:
                step_rows.append([str(i), w.name, '', '', '', giga(w.flops, 4), giga(w.flops, 4)])
        lines += [
            '',
            'Work of the backbone in execution order (tokens per image; queries = tokens whose queries/MLP '
            'ran, keys = tokens attended over, new kv = frozen tokens whose keys/values were projected):',
            '',
        ]
        lines += markdown_table(
            ['#', 'what', 'queries', 'keys', 'new kv', 'GFLOPs', 'dense GFLOPs'], step_rows, 'rlrrrrr'
        )
    return '\n'.join(lines) + '\n'
