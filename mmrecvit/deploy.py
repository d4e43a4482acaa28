"""ONNX export of our backbones and of the det/seg/cls models built on them, with an onnxruntime
parity check before anything is kept (the HF conversion rule: convert, prove parity, then save).

    module = export_module(model, scope)             what is exported (backbone + neck, segmentor, classifier)
    check_exportable(module, dynamic)                refuse the execution modes (and modules) that cannot export
    export_onnx(module, x, path, stride, dynamic)    torch.onnx.export(..., dynamo=True)
    rows = onnx_parity(module, path, sizes)          max |onnxruntime - eager| per output and input size
    print(format_parity(rows))

Plain torch + onnx/onnxruntime: the module needs no mmdet/mmseg (the wrappers only call the model).

What cannot export, and why (docs/deployment.md):

* Edge-RecViT with `execution='adaptive'` runs the blocks on the gathered subset of still-active
  tokens; the size of that subset is decided by the ranker on the data, and the engine reads it to
  the host (per image), so the graph would need data-dependent shapes. `execution='masked'` computes
  the same function with masks over all tokens (the authors' reference) and exports.
* MoR-ViT with `routing='token_choice'` gives every token its own depth up front; the token count of
  each recursion is then data dependent in the same way. `routing='expert_choice'` (the default)
  keeps a fixed number of tokens per recursion (ceil(cap_r * Np)) and exports with TopK/Gather in the
  graph: the selection stays data dependent, the shapes do not.

Dynamic H, W and adaptive pooling (UPerHead's pyramid pooling, `nn.AdaptiveAvgPool2d` at bins 1, 2, 3, 6): torch
exports it as an AvgPool whose kernel and stride are fixed at the export size (ONNX has no adaptive pooling op),
so the file is wrong at every other size (max |ort - eager| 0.08 at 288x320 for a 256x256 export). For a dynamic
export each one is replaced, while exporting, by `AdaptiveAvgPoolMatmul`: the same bins as two pooling matrices
built from the input's size, exact at every size. Adaptive max pooling has no such form: a dynamic export of a
module holding one is refused before exporting (export it at the fixed size mmseg's slide inference runs).
"""

from __future__ import annotations

import contextlib
import io
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from .models.edge_recvit import EdgeRecViT
from .models.mor_vit import MoRViT
from .models.revit import ReViT
from .models.revit_fold import fold_to_plainvit

TOLERANCE = 1e-4  # max |onnxruntime - eager| in fp32
SCOPES = ('mmdet', 'mmseg', 'mmpretrain')
REVIT_MODES = ('fold', 'online')


class BackboneNeck(nn.Module):
    """A detector's backbone + neck: image (B, 3, H, W) -> the neck's tuple of maps (what the heads read)."""

    def __init__(self, detector: nn.Module) -> None:
        super().__init__()
        self.backbone = detector.backbone
        self.neck = detector.neck if getattr(detector, 'with_neck', False) else nn.Identity()

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        return tuple(self.neck(self.backbone(x)))


class TensorMode(nn.Module):
    """A segmentor's (or classifier's) `model(inputs, mode='tensor')`: seg logits (B, K, h, w) or class
    logits (B, K), as a 1-tuple."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        out = self.model(x, mode='tensor')
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def fold_revit_backbone(model: nn.Module) -> bool:
    """Replace a reViT `model.backbone` by its folded dense twin (`fold_to_plainvit`); True if it did."""
    backbone = getattr(model, 'backbone', None)
    if not isinstance(backbone, ReViT):
        return False
    model.backbone = fold_to_plainvit(backbone)
    return True


def export_module(model: nn.Module, scope: str) -> nn.Module:
    """The part of an mm model that is exported, in eval mode: mmdet -> backbone + neck, mmseg -> the
    whole segmentor in tensor mode, mmpretrain -> the classifier's logits."""
    if scope == 'mmdet':
        return BackboneNeck(model).eval()
    if scope in ('mmseg', 'mmpretrain'):
        return TensorMode(model).eval()
    raise ValueError(f'scope must be one of {list(SCOPES)}, got {scope!r}')


def check_exportable(module: nn.Module, dynamic: bool = False) -> None:
    """Raise ValueError for a backbone in an execution mode with data-dependent token counts, naming the argument
    and the value that exports, and with `dynamic` for a module no dynamic ONNX graph computes (module docstring)."""
    for name, m in module.named_modules():
        where = name or type(m).__name__
        if dynamic and isinstance(m, nn.AdaptiveMaxPool2d):
            raise ValueError(
                f'{where}: {type(m).__name__} cannot be exported with dynamic H, W: ONNX has no adaptive pooling and '
                'adaptive max pooling no fixed-kernel form; export at a fixed size'
            )
        if isinstance(m, EdgeRecViT) and m.execution != 'masked':
            raise ValueError(
                f'{where}: EdgeRecViT(execution={m.execution!r}) cannot be exported to ONNX: the '
                'adaptive engine runs a data-dependent number of tokens per block; use '
                "execution='masked' (the same function over all tokens with masks), e.g. "
                '--cfg-options model.backbone.execution=masked'
            )
        if isinstance(m, MoRViT) and m.routing != 'expert_choice':
            raise ValueError(
                f'{where}: MoRViT(routing={m.routing!r}) cannot be exported to ONNX: every token '
                'chooses its own depth, so each recursion runs a data-dependent number of tokens; '
                "routing='expert_choice' (a fixed count per recursion, TopK in the graph) exports"
            )


def pooling_matrix(bins: int, size: int | Tensor, like: Tensor) -> Tensor:
    """(bins, size): row i averages the inputs of adaptive pooling's bin i, [floor(i n / b), ceil((i + 1) n / b))."""
    i = torch.arange(bins, device=like.device)
    start, end = (i * size) // bins, ((i + 1) * size + bins - 1) // bins
    j = torch.arange(size, device=like.device)
    inside = ((j[None] >= start[:, None]) & (j[None] < end[:, None])).to(like.dtype)
    return inside / inside.sum(1, keepdim=True)


class AdaptiveAvgPoolMatmul(nn.Module):
    """`nn.AdaptiveAvgPool2d(output_size)` as P_h x P_w^T with pooling matrices built from the input's size: what
    a dynamic ONNX export can express at every size (module docstring). Written by hand: neither torch's exporter
    nor onnxscript lowers adaptive pooling with a symbolic size."""

    def __init__(self, output_size: int | Sequence[int | None]) -> None:
        super().__init__()
        self.output_size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)

    def forward(self, x: Tensor) -> Tensor:
        H, W = x.shape[-2:]
        bins_h, bins_w = (n if n is not None else s for n, s in zip(self.output_size, (H, W)))
        # (bins_h, H) @ (B, C, H, W) @ (W, bins_w) -> (B, C, bins_h, bins_w)
        return pooling_matrix(bins_h, H, x) @ x @ pooling_matrix(bins_w, W, x).T


@contextlib.contextmanager
def dynamic_pooling(module: nn.Module) -> Iterator[None]:
    """Inside: every `nn.AdaptiveAvgPool2d` of `module` replaced by an `AdaptiveAvgPoolMatmul` (put back after)."""
    swapped = [(name, m) for name, m in module.named_modules() if isinstance(m, nn.AdaptiveAvgPool2d)]
    for name, m in swapped:
        module.set_submodule(name, AdaptiveAvgPoolMatmul(m.output_size))
    try:
        yield
    finally:
        for name, m in swapped:
            module.set_submodule(name, m)


def _floordiv(a, b):  # onnxscript types; see export_onnx
    from onnxscript import INT64
    from onnxscript import opset18 as op

    q = op.Div(a, b)  # truncates toward zero
    inexact = op.Not(op.Equal(op.Mul(q, b), a))
    negative = op.Xor(op.Less(a, op.Constant(value_int=0)), op.Less(b, op.Constant(value_int=0)))
    return op.Sub(q, op.Cast(op.And(inexact, negative), to=INT64.dtype))


def dynamic_hw(stride: int) -> tuple[dict[int, object]]:
    """`dynamic_shapes` for one (B, C, H, W) input whose H and W are multiples of `stride` (>= 2 strides)."""
    h, w = torch.export.Dim('h', min=2), torch.export.Dim('w', min=2)
    return ({2: stride * h, 3: stride * w},)


def export_onnx(module: nn.Module, x: Tensor, path: str | Path, stride: int, dynamic: bool = False) -> Path:
    """Export `module` (eval) at the example input `x` with the dynamo exporter; H and W dynamic in
    multiples of `stride` when `dynamic`. Writes `path`; the exporter's progress prints are swallowed.

    The symbolic `//` of shape arithmetic is lowered with a true floor division: onnxscript's
    `operator.floordiv` is integer Div (truncation, right for non-negative operands only), and sympy
    writes a ceiling as `-(-a // b)`, so MoR-ViT's ceil(cap * Np) came out one short at sizes where
    cap * Np is not an integer (tests/test_deploy.py, 64x64).
    """
    check_exportable(module, dynamic)
    path = Path(path)
    kwargs = dict(dynamic_shapes=dynamic_hw(stride)) if dynamic else {}
    with contextlib.redirect_stdout(io.StringIO()), dynamic_pooling(module) if dynamic else contextlib.nullcontext():
        torch.onnx.export(
            module.eval(),
            (x,),
            str(path),
            dynamo=True,
            external_data=False,
            custom_translation_table={operator.floordiv: _floordiv},
            **kwargs,
        )
    return path


@dataclass
class ParityRow:
    size: tuple[int, int]
    output: int
    shape: tuple[int, ...]
    max_abs_diff: float


def onnx_parity(
    module: nn.Module, path: str | Path, sizes: Sequence[tuple[int, int]], batch: int = 1, seed: int = 0
) -> list[ParityRow]:
    """Run the ONNX file in onnxruntime (CPU) and `module` eagerly on the same random inputs, one per
    size (H, W); one row per output and size. A missing or reshaped output is an error."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=['CPUExecutionProvider'])
    name = session.get_inputs()[0].name
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for H, W in sizes:
        x = torch.randn(batch, 3, H, W, generator=gen)
        with torch.no_grad():
            ref = module.eval()(x)
        out = session.run(None, {name: x.numpy()})
        if len(out) != len(ref):
            raise RuntimeError(f'{path}: {len(out)} onnxruntime outputs at {H}x{W}, eager has {len(ref)}')
        for i, (a, b) in enumerate(zip(ref, out)):
            if tuple(a.shape) != b.shape:
                raise RuntimeError(
                    f'{path}: output {i} at {H}x{W} is {b.shape} in onnxruntime, {tuple(a.shape)} eagerly'
                )
            rows.append(ParityRow((H, W), i, tuple(a.shape), float(np.abs(a.numpy() - b).max())))
    return rows


def format_parity(rows: Sequence[ParityRow], tolerance: float = TOLERANCE) -> str:
    """The parity table: input size, output index, its shape, max |diff| and ok/FAIL against `tolerance`."""
    lines = [
        f'{"input":>11}  {"output":>6}  {"shape":<20} {"max |ort - eager|":>17}  ok',
        f'{"-" * 11}  {"-" * 6}  {"-" * 20} {"-" * 17}  --',
    ]
    for r in rows:
        ok = 'ok' if r.max_abs_diff <= tolerance else 'FAIL'
        lines.append(
            f'{r.size[0]:>5}x{r.size[1]:<5}  {r.output:>6}  {"x".join(map(str, r.shape)):<20} '
            f'{r.max_abs_diff:>17.3g}  {ok}'
        )
    return '\n'.join(lines)


def parity_ok(rows: Sequence[ParityRow], tolerance: float = TOLERANCE) -> bool:
    return bool(rows) and all(r.max_abs_diff <= tolerance for r in rows)


def default_check_sizes(shape: tuple[int, int], stride: int, dynamic: bool) -> list[tuple[int, int]]:
    """The export size, and with `dynamic` two others in multiples of `stride`: (H + s, W + 2s) and a
    smaller one, (H - s, W - s), or (H + 2s, W + s) when H or W is under 3 strides."""
    H, W = shape
    if not dynamic:
        return [(H, W)]
    smaller = (H - stride, W - stride) if min(H, W) >= 3 * stride else (H + 2 * stride, W + stride)
    return [(H, W), (H + stride, W + 2 * stride), smaller]
