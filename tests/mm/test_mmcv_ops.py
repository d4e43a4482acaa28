"""mmcv's ops as our recipes run them, from each backend: mmcv 2.1.0's compiled `_ext` (as our set-up builds it:
the installed full mmcv, else the cached wheel's) and mmrecvit's table over torchvision's kernels (the default,
mmcv-lite; mmrecvit/mm/mmcv_ext.py). The ops are those the recipes reach (RoIAlign forward and backward, NMS),
run through mmcv's own wrappers and autograd Functions with one backend or the other behind them.

Measured parity on the CPU: identical results in fp32 and fp64, forward and backward, for random boxes and the
edge cases (no boxes, boxes partly or wholly outside the image, zero-size boxes, `aligned` both ways, sampling
ratio 0 and 2); NMS keeps the same boxes. Under fp16 autocast the table computes in fp32 and rounds once (closer
to the fp32 result than compiled mmcv's half arithmetic); bf16 only the table runs.
"""

import importlib
import importlib.util
import sys
import types

import pytest
import torch
import torchvision
from helpers import REPO, compiled_mmcv_ext

import mmrecvit.mm  # noqa: F401  (first: with mmcv-lite it provides mmcv._ext)
from mmrecvit.mm.mmcv_ext import MMCVExtFinder, backend


@pytest.fixture(scope='module')
def compiled(tmp_path_factory):
    """mmcv's compiled `_ext`: the installed one (full mmcv), else loaded from the wheel without installing it."""
    if backend() == 'compiled':
        return importlib.import_module('mmcv._ext')
    path = compiled_mmcv_ext(tmp_path_factory.mktemp('compiled_mmcv'))
    if path is None:
        pytest.skip(
            'no compiled mmcv 2.1.0 wheel to compare with: set MMRECVIT_WHEEL_DIR (.ci/run does) or run '
            '`make setup MMCV=full` once (it caches the wheel)'
        )
    spec = importlib.util.spec_from_file_location('_ext', path)  # the init function is PyInit__ext
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def table():
    """The table as mmcv-lite gets it (whatever mmcv is installed here)."""
    module = types.ModuleType('mmcv._ext')
    MMCVExtFinder().exec_module(module)
    return module


@pytest.fixture(params=['table', 'compiled'])
def ext(request):
    return request.getfixturevalue(request.param)


@pytest.fixture
def mmcv_ops(monkeypatch):
    """mmcv.ops with a given `_ext` behind its RoIAlign and NMS wrappers."""
    import mmcv.ops

    def use(ext):
        for module in ('mmcv.ops.roi_align', 'mmcv.ops.nms'):
            monkeypatch.setattr(sys.modules[module], 'ext_module', ext)
        return mmcv.ops

    return use


def random_rois(n: int, height: int, width: int, scale: float, g: torch.Generator) -> torch.Tensor:
    """(n, 5) RoIs (batch index of 2, x1, y1, x2, y2 in image pixels) over a (height, width) map at `scale`: random
    boxes reaching past the borders, a tenth of zero size, a tenth wholly outside the image."""
    size = torch.tensor([width, height]) / scale
    xy = torch.rand(n, 2, generator=g) * size * 1.4 - 0.2 * size
    wh = torch.rand(n, 2, generator=g) * size / 3
    wh[: n // 10] = 0
    boxes = torch.cat([xy, xy + wh], 1)
    boxes[n // 10 : n // 5] += size.repeat(2) * 1.5
    return torch.cat([torch.randint(0, 2, (n, 1), generator=g).float(), boxes], 1)


def roi_align_and_grad(ops, feats, rois, out_size, scale, sampling_ratio, aligned, seed=1):
    """mmcv's roi_align forward, and the input's gradient for a fixed random output gradient."""
    feats = feats.detach().requires_grad_()
    out = ops.roi_align(feats, rois, out_size, scale, sampling_ratio, 'avg', aligned)
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)).to(out.dtype)
    (grad,) = torch.autograd.grad((out * weight).sum(), feats) if out.numel() else (torch.zeros_like(feats),)
    return out.detach(), grad


@pytest.mark.parametrize('aligned', [True, False])
@pytest.mark.parametrize('sampling_ratio', [0, 2])
@pytest.mark.parametrize('scale, out_size', [(1 / 4, 7), (1 / 16, 14), (1.0, 7)])  # box head, mask head, crops
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_roi_align_is_identical_forward_and_backward(
    mmcv_ops, compiled, table, aligned, sampling_ratio, scale, out_size, dtype
):
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(2, 8, 40, 48, generator=g, dtype=dtype)
    rois = random_rois(60, 40, 48, scale, g).to(dtype)
    args = (rois, out_size, scale, sampling_ratio, aligned)
    out, grad = roi_align_and_grad(mmcv_ops(compiled), feats, *args)
    out_table, grad_table = roi_align_and_grad(mmcv_ops(table), feats, *args)
    assert out.abs().sum() > 0 and grad.abs().sum() > 0 and (out == 0).all(-1).all(-1).all(-1).any()  # outside: 0
    torch.testing.assert_close(out_table, out, rtol=0, atol=0)
    torch.testing.assert_close(grad_table, grad, rtol=0, atol=0)


@pytest.mark.parametrize('aligned', [True, False])
def test_roi_align_without_boxes(mmcv_ops, ext, aligned):
    feats = torch.randn(2, 8, 10, 12, requires_grad=True)
    out = mmcv_ops(ext).roi_align(feats, torch.zeros(0, 5), 7, 0.25, 0, 'avg', aligned)
    assert out.shape == (0, 8, 7, 7)
    out.sum().backward()
    assert feats.grad.shape == feats.shape and not feats.grad.any()


def test_roi_align_under_fp16_autocast(mmcv_ops, compiled, table):
    """What fp16 AMP training (`--amp`) hands the RoI extractors: half features and RoIs. The table computes in
    fp32 and rounds once, as torchvision's autocast does; compiled mmcv computes in half."""
    g = torch.Generator().manual_seed(2)
    feats = torch.randn(2, 8, 40, 48, generator=g).half()
    rois = random_rois(60, 40, 48, 1 / 4, g).half()
    results = {}
    for name, ext in (('table', table), ('compiled', compiled)):
        with torch.autocast('cpu', dtype=torch.float16):
            results[name] = roi_align_and_grad(mmcv_ops(ext), feats, rois, 7, 1 / 4, 0, True)
    ref, ref_grad = roi_align_and_grad(mmcv_ops(table), feats.float(), rois.float(), 7, 1 / 4, 0, True)
    (out, grad), (out_c, grad_c) = results['table'], results['compiled']
    assert out.dtype == grad.dtype == out_c.dtype == torch.float16
    assert torch.equal(out, ref.half())  # fp32 arithmetic, one rounding
    torch.testing.assert_close(out_c.float(), ref, rtol=0.05, atol=0.1)  # half arithmetic
    assert (out.float() - ref).abs().max() <= (out_c.float() - ref).abs().max()
    # backward: half output gradients (no autocast in backward); the same fp32-then-round against half arithmetic
    torch.testing.assert_close(grad.float(), ref_grad, rtol=0.01, atol=0.05)
    torch.testing.assert_close(grad_c.float(), ref_grad, rtol=0.05, atol=0.5)


def test_roi_align_in_bf16_runs_on_the_table_only(mmcv_ops, compiled, table):
    """bf16 under autocast: the table computes in fp32; compiled mmcv has no bf16 kernel (why
    `tools/train.py --amp-dtype bf16` keeps the heads in fp32)."""
    g = torch.Generator().manual_seed(3)
    feats = torch.randn(2, 8, 20, 24, generator=g).bfloat16()
    rois = random_rois(30, 20, 24, 1 / 4, g).bfloat16()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out, grad = roi_align_and_grad(mmcv_ops(table), feats, rois, 7, 1 / 4, 0, True)
        with pytest.raises(RuntimeError, match='BFloat16'):
            mmcv_ops(compiled).roi_align(feats, rois, 7, 1 / 4, 0, 'avg', True)
    ref, ref_grad = roi_align_and_grad(mmcv_ops(table), feats.float(), rois.float(), 7, 1 / 4, 0, True)
    assert torch.equal(out, ref.bfloat16())
    torch.testing.assert_close(grad.float(), ref_grad, rtol=0.02, atol=0.1)


def random_boxes(n: int, size: float, g: torch.Generator) -> torch.Tensor:
    """Boxes (x1, y1, x2, y2), a tenth of them of zero size."""
    xy = torch.rand(n, 2, generator=g) * size
    wh = torch.rand(n, 2, generator=g) * size / 4
    wh[: n // 10] = 0
    return torch.cat([xy, xy + wh], 1)


@pytest.mark.parametrize('iou', [0.3, 0.5, 0.7])
@pytest.mark.parametrize('offset', [0, 1])
def test_nms_keeps_the_same_boxes(mmcv_ops, compiled, table, iou, offset):
    g = torch.Generator().manual_seed(4)
    boxes, scores = random_boxes(600, 200, g), torch.rand(600, generator=g)
    dets, keep = mmcv_ops(compiled).nms(boxes, scores, iou, offset=offset)
    dets_table, keep_table = mmcv_ops(table).nms(boxes, scores, iou, offset=offset)
    assert 0 < len(keep) < len(boxes)
    assert torch.equal(keep_table, keep) and torch.equal(dets_table, dets)
    # mmcv's score threshold and max_num around the kernel
    _, keep = mmcv_ops(compiled).nms(boxes, scores, iou, offset=offset, score_threshold=0.3, max_num=50)
    assert torch.equal(mmcv_ops(table).nms(boxes, scores, iou, offset=offset, score_threshold=0.3, max_num=50)[1], keep)


@pytest.mark.parametrize('num', [600, 12000])  # mmcv's batched_nms runs class by class past 10000 boxes
def test_batched_nms_keeps_the_same_boxes(mmcv_ops, compiled, table, num):
    g = torch.Generator().manual_seed(5)
    boxes, scores, labels = random_boxes(num, 400, g), torch.rand(num, generator=g), torch.randint(0, 5, (num,))
    cfg = dict(type='nms', iou_threshold=0.5)
    dets, keep = mmcv_ops(compiled).batched_nms(boxes, scores, labels, cfg)
    dets_table, keep_table = mmcv_ops(table).batched_nms(boxes, scores, labels, cfg)
    assert torch.equal(keep_table, keep) and torch.equal(dets_table, dets)


def test_nms_without_boxes(mmcv_ops, ext):
    dets, keep = mmcv_ops(ext).nms(torch.zeros(0, 4), torch.zeros(0), 0.5)
    assert dets.shape == (0, 5) and keep.shape == (0,) and keep.dtype == torch.long


def test_nms_of_half_boxes_under_autocast(mmcv_ops, compiled, table):
    """The table takes half boxes (in fp32, as torchvision's autocast does); compiled mmcv's CPU NMS takes fp32.
    Distinct scores: the two sorts may order equal scores differently (as everywhere here: random fp32 scores)."""
    g = torch.Generator().manual_seed(6)
    boxes, scores = random_boxes(300, 200, g).half(), (torch.randperm(300, generator=g) / 300).half()
    with torch.autocast('cpu', dtype=torch.float16):
        _, keep = mmcv_ops(table).nms(boxes, scores, 0.5)
        with pytest.raises(RuntimeError, match='Half'):
            mmcv_ops(compiled).nms(boxes, scores, 0.5)
    assert torch.equal(keep, mmcv_ops(compiled).nms(boxes.float(), scores.float(), 0.5)[1])


def test_compiled_roi_align_misreads_channels_last_input_the_table_does_not(mmcv_ops, compiled, table):
    """Why our backbones and SimplePyramid return contiguous maps: compiled mmcv's RoIAlign indexes raw memory
    as NCHW, so a channels-last tensor (what a transposed token sequence, timm's LayerNorm2d and every
    convolution after them produce) gives scrambled RoI features, with no error. torchvision's RoIAlign, hence
    the table, is layout-agnostic."""
    g = torch.Generator().manual_seed(7)
    feats = torch.randn(2, 16, 12, 14, generator=g)
    channels_last = feats.to(memory_format=torch.channels_last)
    rois = random_rois(20, 12, 14, 1 / 16, g)
    ref = torchvision.ops.roi_align(feats, rois, (7, 7), 1 / 16, 0, aligned=True)
    torch.testing.assert_close(mmcv_ops(table).roi_align(channels_last, rois, 7, 1 / 16, 0, 'avg', True), ref)
    torch.testing.assert_close(mmcv_ops(compiled).roi_align(feats, rois, 7, 1 / 16, 0, 'avg', True), ref)
    misread = mmcv_ops(compiled).roi_align(channels_last, rois, 7, 1 / 16, 0, 'avg', True)
    assert (misread - ref).abs().max() > 0.1, 'mmcv RoIAlign now handles channels-last input: the copies may go'


@pytest.mark.parametrize(
    'config', ['mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py', 'mask-rcnn_morvit-ti_fpn_1xb2-800it_toy-coco.py']
)
def test_detector_roi_features_are_the_features_at_the_boxes(mmcv_ops, ext, config):
    """End to end through our backbone, SimplePyramid and mmdet's FPN: the RoI head's features equal
    torchvision's RoIAlign of the right FPN level at each box, with either backend (this caught the
    channels-last bug, under which the toy Mask R-CNN could not learn to classify)."""
    from mmdet.registry import MODELS
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    mmcv_ops(ext)
    cfg = Config.fromfile(f'{REPO}/configs/det/{config}')
    init_default_scope('mmdet')
    model = MODELS.build(cfg.model).eval()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        feats = model.extract_feat(torch.randn(2, 3, 128, 160, generator=g))
        extractor = model.roi_head.bbox_roi_extractor
        xy = torch.rand(60, 2, generator=g) * 120
        wh = torch.exp(torch.empty(60, 2).uniform_(2, 7, generator=g))  # 7..1100 px: every FPN level
        rois = torch.cat([torch.randint(0, 2, (60, 1), generator=g).float(), xy, xy + wh], 1)
        ours = extractor(feats[: extractor.num_inputs], rois)
        levels = extractor.map_roi_levels(rois, extractor.num_inputs)
        ref = torch.zeros_like(ours)
        for i, stride in enumerate(extractor.featmap_strides):
            idx = levels == i
            ref[idx] = torchvision.ops.roi_align(feats[i], rois[idx], (7, 7), 1 / stride, 0, aligned=True)
    assert all(f.is_contiguous() for f in feats)
    assert len(levels.unique()) == len(extractor.featmap_strides)  # the boxes exercise every level
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-5)
