"""The tools' plumbing (mmrecvit/mm/tooling.py) takes its paths from the caller: the default toy image goes
under the data root the tool passes, never into a repository the package guesses from where it is installed."""

import inspect

import pytest

from mmrecvit.mm import tooling


def test_default_image_is_written_under_the_callers_data_root(tmp_path):
    assert inspect.signature(tooling.default_image).parameters['data_root'].default is inspect.Parameter.empty
    assert not hasattr(tooling, 'REPO')
    with pytest.raises(TypeError):
        tooling.default_image('mmpretrain')
    root = tmp_path / 'mine'
    path = tooling.default_image('mmpretrain', root)  # missing: written there by make_toy_data
    assert path.is_file() and path.is_relative_to(root)
    mtime = path.stat().st_mtime_ns
    assert tooling.default_image('mmpretrain', str(root)) == path and path.stat().st_mtime_ns == mtime  # found
    with pytest.raises(ValueError, match='no toy image for scope'):
        tooling.default_image('mmocr', root)


def test_every_score_is_in_percent():
    """Issue 41.5: one unit everywhere; mmdet's CocoMetric reports AP as a fraction (and -1 for an empty size)."""
    metrics = {'coco/bbox_mAP': 0.54, 'coco/segm_mAP_50': 0.612, 'coco/bbox_mAP_l': -1.0, 'mIoU': 30.3, 'aAcc': 80.0}
    assert tooling.in_percent(metrics) == pytest.approx(
        {'coco/bbox_mAP': 54.0, 'coco/segm_mAP_50': 61.2, 'coco/bbox_mAP_l': -1.0, 'mIoU': 30.3, 'aAcc': 80.0}
    )
