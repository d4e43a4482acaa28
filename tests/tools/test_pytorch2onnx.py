"""tools/deployment/pytorch2onnx.py end to end: det, seg and cls toy configs, parity before saving, refusals."""

import importlib.util
import os
import os.path as osp
import stat

import pytest
from helpers import REPO

pytestmark = pytest.mark.slow  # each test exports a model (torch's dynamo exporter: seconds each)
TOOL = osp.join(REPO, 'tools/deployment/pytorch2onnx.py')

DET = osp.join(REPO, 'configs/det/mask-rcnn_morvit-ti_fpn_1xb2-800it_toy-coco.py')

SEG = osp.join(REPO, 'configs/seg/upernet_revit-ti_1xb4-150it_toy-ade20k-256x256.py')


def load_tool():
    spec = importlib.util.spec_from_file_location('pytorch2onnx', TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tool_det_dynamic(tmp_path, capsys):
    out = tmp_path / 'det.onnx'
    umask = os.umask(0o027)  # a umask the temporary file's 0600 would not match
    try:
        assert load_tool().main([DET, 'none', '--shape', '64', '64', '--dynamic', '--out', str(out)]) == 0
    finally:
        os.umask(umask)
    text = capsys.readouterr().out
    assert out.is_file() and 'saved' in text
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # what open() makes under umask 027
    assert text.count(' ok\n') + text.endswith(' ok') >= 3 * 5  # 5 neck maps at 3 sizes
    assert not list(tmp_path.glob('*.tmp'))


def test_tool_seg_folded_revit(tmp_path, capsys):
    out = tmp_path / 'seg.onnx'
    assert load_tool().main([SEG, 'none', '--shape', '64', '64', '--out', str(out)]) == 0
    text = capsys.readouterr().out
    assert 'reViT folded to dense' in text and '1x150x16x16' in text and out.is_file()


def test_tool_refuses_to_save_on_parity_failure(tmp_path, capsys):
    out = tmp_path / 'seg.onnx'
    assert load_tool().main([SEG, 'none', '--shape', '64', '64', '--out', str(out), '--tolerance', '0']) == 1
    assert 'FAIL' in capsys.readouterr().out
    assert not out.exists() and not list(tmp_path.iterdir())


def test_tool_refuses_adaptive_edge_recvit(tmp_path):
    cfg = osp.join(REPO, 'configs/det/mask-rcnn_edgerecvit-ti_fpn_1xb2-800it_toy-coco.py')
    with pytest.raises(SystemExit, match="execution='masked'"):
        load_tool().main(
            [
                cfg,
                'none',
                '--shape',
                '64',
                '64',
                '--out',
                str(tmp_path / 'x.onnx'),
                '--cfg-options',
                'model.backbone.execution=adaptive',
            ]
        )
    assert not list(tmp_path.iterdir())


def test_tool_cls_online_revit(tmp_path, capsys):
    """--revit-mode online keeps the reViT (router and expert merge in the graph); a classifier gives logits."""
    cfg = osp.join(REPO, 'configs/cls/revit-ti_1xb32-200it_toy-cls.py')
    out = tmp_path / 'cls.onnx'
    assert load_tool().main([cfg, 'none', '--shape', '64', '64', '--revit-mode', 'online', '--out', str(out)]) == 0
    text = capsys.readouterr().out
    assert 'folded' not in text and 'ImageClassifier' in text and out.is_file()


def test_tool_seg_dynamic_matches_at_every_size(tmp_path, capsys):
    """Issue 41.8: the segmentor's pyramid pooling was exported at the export size's bins and failed the tool's own
    parity check at the two other sizes."""
    cfg = osp.join(REPO, 'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py')
    out = tmp_path / 'seg.onnx'
    assert load_tool().main([cfg, 'none', '--shape', '64', '64', '--dynamic', '--out', str(out)]) == 0
    text = capsys.readouterr().out
    rows = [line.split() for line in text.splitlines() if line.strip()[:1].isdigit()]  # size, output, shape, diff, ok
    assert [(r[0], r[-1]) for r in rows] == [('64x64', 'ok'), ('96x128', 'ok'), ('128x96', 'ok')] and out.is_file()


def test_the_fixed_size_command_is_the_slide_crop_of_a_sliding_config():
    import argparse

    from helpers import cached_config

    tool = load_tool()
    args = argparse.Namespace(config='C.py', checkpoint='none', shape=[64, 96])
    slide = cached_config(osp.join(REPO, 'configs/seg/upernet_plainvit-s_8xb2-amp-ld0.95-160k_ade20k-512x512.py'))
    command = 'python tools/deployment/pytorch2onnx.py C.py none --shape'
    assert tool.fixed_size_command(args, slide) == f'{command} 512 512'  # the windows mmseg's slide inference runs
    assert tool.fixed_size_command(args, cached_config(SEG)) == f'{command} 64 96'  # whole-image inference
