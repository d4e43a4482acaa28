"""mmcv's compiled ops, as our set-up builds them (C++20 against current torch), compute what
torchvision's independent implementations compute: the ops Mask R-CNN depends on."""
import pytest
import torch
import torchvision
from mmcv.ops import batched_nms, nms, roi_align


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
