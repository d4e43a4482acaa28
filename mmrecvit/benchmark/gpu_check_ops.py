"""The GPU check's mmcv_ops check (`gpu_check.py`): mmcv's RoIAlign and NMS as mmcv-lite gets them
(mmrecvit/mm/mmcv_ext.py: torchvision's kernels, no nvcc) on the device against the CPU, and through mmcv's own
wrappers when mmcv imports. On the CPU dry mode both sides are the CPU: only fp16's rounded inputs differ."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from .gpu_check_results import Result, Setup, guarded

_g = torch.Generator().manual_seed(0)
FEATS = torch.randn(2, 64, 50, 60, generator=_g)  # an FPN level at stride 8 of a 400x480 image
_xy = torch.rand(300, 2, generator=_g) * torch.tensor([540.0, 450.0]) - 30  # some boxes past the borders
ROIS = torch.cat(
    [torch.randint(0, 2, (300, 1), generator=_g).float(), _xy, _xy + torch.rand(300, 2, generator=_g) * 150], 1
)
GRAD_OUT = torch.randn(300, 64, 7, 7, generator=_g)
SCORES = torch.rand(300, generator=_g)
TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-3}  # of the largest value of the fp32 CPU result


def roi_align(device: str, dtype: torch.dtype, aligned: bool, sampling_ratio: int, inputs: torch.dtype) -> tuple:
    """The table's entry points as mmcv's RoIAlignFunction calls them (inputs rounded to `inputs` first): the output
    and the input gradient, on the CPU in fp32."""
    from ..mm import mmcv_ext

    x, r, go = (t.to(inputs).to(device, dtype) for t in (FEATS, ROIS, GRAD_OUT))
    kw = dict(
        aligned_height=7,
        aligned_width=7,
        spatial_scale=1 / 8,
        sampling_ratio=sampling_ratio,
        pool_mode=1,
        aligned=aligned,
    )
    out, grad, empty = x.new_zeros(300, 64, 7, 7), x.new_zeros(x.shape), x.new_zeros(0)
    with torch.autocast(device, dtype=torch.float16, enabled=dtype == torch.float16):
        mmcv_ext.roi_align_forward(x, r, out, empty, empty, **kw)
    mmcv_ext.roi_align_backward(go, r, empty, empty, grad, **kw)
    return out.float().cpu(), grad.float().cpu()


def mmcv_ops(setup: Setup) -> Iterator[Result]:
    yield from guarded('mmcv_ops', 'roi_align', lambda: [_roi_align(setup)], 'within tolerance')
    yield from guarded('mmcv_ops', 'nms', lambda: [_nms(setup)], 'same boxes')
    yield from guarded('mmcv_ops', 'mmcv.ops wrappers', lambda: [_wrappers(setup)], 'the table')


def _roi_align(setup: Setup) -> Result:
    """fp32 and fp16 (AMP's half inputs under autocast, against fp32 on them), aligned or not, sampling 0 or 2."""
    worst, where = 0.0, ''
    for dtype, tol in TOLERANCE.items():
        for aligned in (True, False):
            for sampling_ratio in (0, 2):
                ref = roi_align('cpu', torch.float32, aligned, sampling_ratio, inputs=dtype)
                got = roi_align(setup.device.type, dtype, aligned, sampling_ratio, inputs=torch.float32)
                for part, a, b in zip(('forward', 'backward'), got, ref):
                    ratio = float((a - b).abs().max() / b.abs().max()) / tol
                    if ratio >= worst:
                        worst, where = ratio, f'{str(dtype)[6:]} aligned={aligned} sampling={sampling_ratio} {part}'
    measured = f'worst {worst:.2g} of its tolerance ({where}; fp32 1e-4, fp16 2e-3 of the largest value)'
    return Result('mmcv_ops', 'roi_align', measured, '<= 1 tolerance', worst <= 1)


def _nms(setup: Setup) -> Result:
    from ..mm import mmcv_ext

    boxes = ROIS[:, 1:]
    keep = {d: mmcv_ext.nms(boxes.to(d), SCORES.to(d), 0.5, 0).cpu() for d in ('cpu', setup.device.type)}
    same = torch.equal(keep['cpu'], keep[setup.device.type])
    return Result(
        'mmcv_ops', 'nms', f'{len(keep["cpu"])} boxes kept, {"the same" if same else "DIFFERENT"}', 'same boxes', same
    )


def _wrappers(setup: Setup) -> Result:
    """mmcv's own RoIAlign and nms on the table: the same numbers (CUDA's atomic adds may sum in another order)."""
    from mmcv.ops import RoIAlign, nms

    x = FEATS.to(setup.device).requires_grad_()
    out = RoIAlign(7, 1 / 8, 0, aligned=True)(x, ROIS.to(setup.device))
    out.backward(GRAD_OUT.to(setup.device))
    ref = roi_align(setup.device.type, torch.float32, True, 0, inputs=torch.float32)
    diff = max(float((a.float().cpu() - b).abs().max() / b.abs().max()) for a, b in zip((out.detach(), x.grad), ref))
    boxes = ROIS[:, 1:].to(setup.device)
    same = torch.equal(nms(boxes, SCORES.to(setup.device), 0.5)[1].cpu(), _nms_keep(boxes))
    return Result(
        'mmcv_ops',
        'mmcv.ops wrappers',
        f'RoIAlign {diff:.2g} from the table, nms {"same" if same else "DIFFERENT"}',
        '<= 1e-05, same',
        diff <= 1e-5 and same,
    )


def _nms_keep(boxes: torch.Tensor) -> torch.Tensor:
    from ..mm import mmcv_ext

    return mmcv_ext.nms(boxes.cpu(), SCORES, 0.5, 0)
