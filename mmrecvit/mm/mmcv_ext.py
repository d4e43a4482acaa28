"""mmcv's compiled-op entry points (the module `mmcv._ext`) from torchvision's kernels, for mmcv-lite (issue 38).

mmcv-lite is mmcv without its ~100 compiled C++/CUDA ops: `import mmcv.ops` (hence `import mmdet.models`,
`mmdet.apis`, `mmseg.models`) stops at `No module named 'mmcv._ext'`, the module mmcv's op wrappers take their
kernels from by name (`mmcv.utils.ext_loader.load_ext`). Our recipes reach few of them, found by running every
recipe family under a probe that logs each `mmcv._ext` call (det, Cascade, TTA, seg, cls, the dry runs;
docs/install.md): `roi_align_forward`/`roi_align_backward` (mmdet's RoI extractors, mask targets) and `nms` (RPN,
box heads, TTA, through mmcv's `nms`/`batched_nms`), plus mmcv's compiler report (set-up checks ask for it).
torchvision's wheels carry CPU and CUDA kernels for these ops, so this table needs no compiler and no nvcc; it
writes into the tensors mmcv's wrappers allocate, as the compiled functions do, so mmcv's autograd Functions run
unchanged. Any other op is a stub that mmcv's import-time `hasattr` check accepts and that raises
`MissingMMCVOpError` naming the op and the switch to compiled mmcv when called.

How mmcv finds it: `_mmrecvit_import_hook.py` answers `mmcv._ext` with this table (`MMCVExtFinder`'s spec) only where
Python's own path finder found no compiled `mmcv._ext`, so a full mmcv is used as it is and nothing is written into
mmcv's package; the hook is installed at interpreter start by a `.pth` file (the wheel's, scripts/setup.sh's), else
by `import mmrecvit.mm` (docs/install.md#mmcvs-ops-without-compiling-them).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import types
import warnings
from collections.abc import Callable
from typing import NamedTuple

import torch
import torchvision
from torch import Tensor

FULL_MMCV_SWITCH = (
    '`make setup MMCV=full` in a checkout (scripts/setup.sh --mmcv full), or `pip install mmcv==2.1.0` (it compiles '
    'them) in place of mmcv-lite; docs/install.md'
)


class MissingMMCVOpError(NotImplementedError):
    """An mmcv op that mmcv-lite lacks and this table does not provide."""


def _missing(op: str) -> MissingMMCVOpError:
    return MissingMMCVOpError(
        f"mmcv op '{op}' has no compiled kernel here: mmcv-lite is installed and mmrecvit's torchvision table "
        f'provides only {", ".join(sorted(PROVIDED))}; install mmcv with compiled ops: {FULL_MMCV_SWITCH}'
    )


def _compute_dtype(tensor: Tensor, kernel_dtypes: dict[str, tuple[torch.dtype, ...]]) -> torch.dtype:
    """The tensor's dtype where its device's kernel takes it at full accuracy, else fp32 (issue 48.7: on CUDA an FPN
    level is upcast only for bf16, which torchvision's RoIAlign lacks; fp16 runs as mmcv's compiled kernel runs it).
    Rois go in the same dtype, as mmdet's extractors pass them (the kernels read both as one type)."""
    return tensor.dtype if tensor.dtype in kernel_dtypes.get(tensor.device.type, ()) else torch.float32


# The dtypes torchvision's kernels take, by device. CUDA RoIAlign dispatches fp32/fp64/fp16. The CPU RoIAlign takes
# fp16 but accumulates in it (the GPU check measured 400x its fp16 tolerance against fp32 at adaptive sampling), and
# has no bf16: fp32 there. NMS: fp32 everywhere (its (K, 4) boxes cost nothing to upcast; CPU has no fp16 kernel).
FULL = (torch.float32, torch.float64)
ROI_ALIGN_DTYPES = {'cuda': (*FULL, torch.float16), 'cpu': FULL}
NMS_DTYPES = {'cuda': FULL, 'cpu': FULL}


def _alert_not_deterministic(tensor: Tensor, op: str) -> None:
    """torch's determinism check for a kernel we call by its op (issue 48.7): torchvision's CUDA RoIAlign backward
    accumulates with atomicAdd, so under `torch.use_deterministic_algorithms(True)` (mmengine's
    `randomness.deterministic`) it raises, or warns with `warn_only`, as torch's own non-deterministic kernels do.
    The CPU kernel is deterministic."""
    if tensor.is_cuda and torch.are_deterministic_algorithms_enabled():  # torch has no Python alert: its wording
        message = (
            f'{op} (torchvision CUDA kernel, through mmrecvit.mm.mmcv_ext) does not have a deterministic implementation'
        )
        if torch.is_deterministic_algorithms_warn_only_enabled():
            warnings.warn(message, UserWarning, stacklevel=3)
        else:
            raise RuntimeError(f"{message}, but you set 'torch.use_deterministic_algorithms(True)'")


class RoIAlignParams(NamedTuple):
    """The keyword arguments mmcv's RoIAlignFunction passes to both of its kernels (mmcv/ops/roi_align.py)."""

    aligned_height: int
    aligned_width: int
    spatial_scale: float
    sampling_ratio: int  # 0: adaptive, as torchvision's
    pool_mode: int  # mmcv: 0 = max, 1 = avg; torchvision's RoIAlign averages
    aligned: bool


def _average(op: str, params: dict) -> RoIAlignParams:
    p = RoIAlignParams(**params)
    if p.pool_mode != 1:
        raise _missing(f'{op} (pool_mode=max)')
    return p


def roi_align_forward(
    input: Tensor, rois: Tensor, output: Tensor, argmax_y: Tensor, argmax_x: Tensor, **params
) -> None:
    """mmcv's `roi_align_forward`: `output` <- RoIAlign of `input` at `rois` (K, 5: batch index, x1, y1, x2, y2)."""
    p = _average('roi_align_forward', params)
    dtype = _compute_dtype(input, ROI_ALIGN_DTYPES)
    with torch.autocast(input.device.type, enabled=False):  # torchvision's autocast kernel would upcast the level
        out = torchvision.ops.roi_align(
            input.to(dtype),
            rois.to(dtype),
            (p.aligned_height, p.aligned_width),
            p.spatial_scale,
            p.sampling_ratio,
            p.aligned,
        )
    output.copy_(out)


def roi_align_backward(
    grad_output: Tensor, rois: Tensor, argmax_y: Tensor, argmax_x: Tensor, grad_input: Tensor, **params
) -> None:
    """mmcv's `roi_align_backward`: `grad_input` <- the gradient of the average RoIAlign w.r.t. its input."""
    p = _average('roi_align_backward', params)
    _alert_not_deterministic(grad_output, 'roi_align_backward')
    dtype = _compute_dtype(grad_output, ROI_ALIGN_DTYPES)
    # torchvision's own backward kernel (what autograd runs behind torchvision.ops.roi_align): no public API
    grad = torch.ops.torchvision._roi_align_backward(
        grad_output.to(dtype),
        rois.to(dtype),
        p.spatial_scale,
        p.aligned_height,
        p.aligned_width,
        *grad_input.shape,  # batch, channels, height, width
        p.sampling_ratio,
        p.aligned,
    )
    grad_input.copy_(grad)


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float, offset: int) -> Tensor:
    """mmcv's `nms`: indices of the kept boxes (x1, y1, x2, y2), by decreasing score."""
    dtype = _compute_dtype(boxes, NMS_DTYPES)
    boxes, scores = boxes.to(dtype), scores.to(dtype)
    if offset:  # mmcv's legacy offset=1 widths (x2 - x1 + 1): the same IoUs as boxes whose x2, y2 grow by 1
        boxes = torch.cat([boxes[:, :2], boxes[:, 2:] + offset], 1)
    return torchvision.ops.nms(boxes, scores, iou_threshold)


def get_compiler_version() -> str:
    return f'none: torchvision {torchvision.__version__} kernels (mmrecvit.mm.mmcv_ext)'


def get_compiling_cuda_version() -> str:
    """The CUDA version of torchvision's kernels (torch's), or mmcv's 'not available' for a CPU build."""
    return torch.version.cuda if torchvision.version.cuda else 'not available'


PROVIDED = {
    f.__name__: f
    for f in (roi_align_forward, roi_align_backward, nms, get_compiler_version, get_compiling_cuda_version)
}


def _module_getattr(name: str) -> Callable:
    """Every other op mmcv's wrappers ask for at import: a stub raising `MissingMMCVOpError` when called.
    Private and dunder names are not ops: AttributeError, as `inspect`, `pickle` and `copy` expect."""
    if name.startswith('_'):
        raise AttributeError(f"module 'mmcv._ext' has no attribute {name!r}")

    def missing(*args, **kwargs):
        raise _missing(name)

    missing.__name__ = missing.__qualname__ = name
    return missing


class MMCVExtFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads `mmcv._ext` as this table; the import hook asks it only when no compiled `mmcv._ext` was
    found."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname != 'mmcv._ext':
            return None
        # a real spec (mmengine's `mmcv_full_available` and mmcv's `check_ops_exist` ask pkgutil for it), and a
        # `__file__` that says where the ops come from
        spec = importlib.machinery.ModuleSpec(fullname, self, origin=__file__)
        spec.has_location = True
        return spec

    def create_module(self, spec):
        return None  # a plain module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__.update(PROVIDED)
        module.__getattr__ = _module_getattr
        module.__doc__ = f'mmcv-lite ops from torchvision kernels: {", ".join(sorted(PROVIDED))} ({__name__})'


def backend() -> str | None:
    """Where mmcv's ops come from: 'compiled' (a full mmcv), 'torchvision' (mmcv-lite and this table), or
    None (no mmcv, an mmcv that does not import, or mmcv-lite without the import hook). Nothing is imported beyond
    mmcv's package."""
    try:
        spec = importlib.util.find_spec('mmcv._ext') if importlib.util.find_spec('mmcv') is not None else None
    except ImportError:  # e.g. mmcv without its cv2
        return None
    if spec is None:  # mmcv-lite without this table installed
        return None
    return 'torchvision' if isinstance(spec.loader, MMCVExtFinder) else 'compiled'
