"""mmcv's compiled ops, as our set-up builds them (C++20 against current torch), compute what
torchvision's independent implementations compute: the ops Mask R-CNN depends on."""

import pytest
import torch
import torchvision
from helpers import REPO
from mmcv.ops import batched_nms, nms, roi_align
from mmdet.registry import MODELS
from mmengine.config import Config
from mmengine.registry import init_default_scope

import mmrecvit  # noqa: F401


def random_boxes(n: int, size: float, generator: torch.Generator) -> torch.Tensor:
    xy = torch.rand(n, 2, generator=generator) * size
    wh = torch.rand(n, 2, generator=generator) * size / 4 + 1
    return torch.cat([xy, xy + wh], 1)


@pytest.mark.parametrize('scale,sampling_ratio', [(1.0, 0), (0.25, 0), (0.125, 2), (1 / 16, 1)])
def test_roi_align_matches_torchvision(scale, sampling_ratio):
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(2, 8, 40, 48, generator=g, requires_grad=True)
    size = 40 / scale
    rois = torch.cat([torch.randint(0, 2, (30, 1), generator=g).float(), random_boxes(30, size, g)], 1)
    ours = roi_align(feats, rois, (7, 7), scale, sampling_ratio, 'avg', True)
    ref = torchvision.ops.roi_align(feats, rois, (7, 7), scale, sampling_ratio, aligned=True)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)
    w = torch.randn(ours.shape, generator=g)
    (grad,) = torch.autograd.grad((ours * w).sum(), feats)
    (grad_ref,) = torch.autograd.grad((ref * w).sum(), feats)
    torch.testing.assert_close(grad, grad_ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('iou', [0.3, 0.5, 0.7])
def test_nms_matches_torchvision(iou):
    g = torch.Generator().manual_seed(1)
    boxes, scores = random_boxes(400, 200, g), torch.rand(400, generator=g)
    dets, keep = nms(boxes, scores, iou)
    ref = torchvision.ops.nms(boxes, scores, iou)
    assert torch.equal(keep, ref)
    torch.testing.assert_close(dets, torch.cat([boxes[ref], scores[ref, None]], 1))
    labels = torch.randint(0, 5, (400,), generator=g)
    _, keep = batched_nms(boxes, scores, labels, dict(type='nms', iou_threshold=iou))
    assert torch.equal(keep, torchvision.ops.batched_nms(boxes, scores, labels, iou))


def test_roi_align_reads_its_input_as_nchw_contiguous():
    """Why our backbones and SimplePyramid return contiguous maps: mmcv's RoIAlign indexes raw memory
    as NCHW, so a channels-last tensor (what a transposed token sequence, timm's LayerNorm2d and
    every convolution after them produce) gives scrambled RoI features, with no error.
    torchvision's RoIAlign is layout-agnostic."""
    g = torch.Generator().manual_seed(2)
    feats = torch.randn(2, 16, 12, 14, generator=g)
    channels_last = feats.to(memory_format=torch.channels_last)
    rois = torch.cat([torch.randint(0, 2, (20, 1), generator=g).float(), random_boxes(20, 12 * 16, g)], 1)
    ref = torchvision.ops.roi_align(feats, rois, (7, 7), 1 / 16, 0, aligned=True)
    torch.testing.assert_close(torchvision.ops.roi_align(channels_last, rois, (7, 7), 1 / 16, 0, aligned=True), ref)
    torch.testing.assert_close(roi_align(feats, rois, (7, 7), 1 / 16, 0, 'avg', True), ref, rtol=1e-5, atol=1e-6)
    misread = roi_align(channels_last, rois, (7, 7), 1 / 16, 0, 'avg', True)
    assert (misread - ref).abs().max() > 0.1, 'mmcv RoIAlign now handles channels-last input: the copies may go'


@pytest.mark.parametrize(
    'config', ['mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py', 'mask-rcnn_morvit-ti_fpn_1xb2-800it_toy-coco.py']
)
def test_detector_roi_features_are_the_features_at_the_boxes(config):
    """End to end through our backbone, SimplePyramid and mmdet's FPN: the RoI head's features equal
    torchvision's RoIAlign of the right FPN level at each box (this caught the channels-last bug,
    under which the toy Mask R-CNN could not learn to classify)."""
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
