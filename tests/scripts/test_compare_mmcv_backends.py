"""scripts/compare_mmcv_backends.py (the toy trainings of docs/install.md, one per backend of mmcv's ops): each backend
is the one it names, both give the same losses, and its toy Cascade is mmdet's three stages at the toy heads' width."""

import importlib.util
import json
import os.path as osp
import sys

import pytest
from helpers import REPO, compiled_mmcv_ext, run

SCRIPT = osp.join(REPO, 'scripts', 'compare_mmcv_backends.py')


def load_script():
    spec = importlib.util.spec_from_file_location('compare_mmcv_backends', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_toy_cascade_is_mmdets_three_stages_at_the_toy_width(tmp_path):
    import mmrecvit.mm  # noqa: F401  (first: mmcv's ops, as the script gets them)

    # isort: split
    from mmdet.models.detectors import CascadeRCNN
    from mmdet.registry import MODELS

    script = load_script()
    toy = script.toy_config('det', str(tmp_path), str(tmp_path)).model
    model = MODELS.build(script.toy_config('cascade', str(tmp_path), str(tmp_path)).model)
    assert isinstance(model, CascadeRCNN) and model.roi_head.num_stages == 3
    for head in model.roi_head.bbox_head:
        assert head.fc_out_channels == toy.roi_head.bbox_head.fc_out_channels
        assert head.num_classes == toy.roi_head.bbox_head.num_classes
    assert [s.sampler.num for s in model.roi_head.train_cfg] == [toy.train_cfg.rcnn.sampler.num] * 3


@pytest.mark.slow
@pytest.mark.subprocess
def test_both_backends_train_with_the_same_losses(tmp_path):
    if compiled_mmcv_ext(tmp_path / 'probe') is None:
        pytest.skip('no compiled mmcv 2.1.0 wheel (MMRECVIT_WHEEL_DIR, the wheel cache or ../shared/wheels)')
    out = tmp_path / 'runs.jsonl'
    # the script asserts that mmcv._ext is the backend asked for; the last run is another seed (the noise's unit)
    for backend, seed in (('table', []), ('compiled', []), ('table', ['--seed', '1'])):
        res = run(
            [sys.executable, SCRIPT, '--backend', backend, '--model', 'det', '--iters', '2', '--no-eval', *seed]
            + ['--data-root', str(tmp_path / 'data'), '--work-dir', str(tmp_path / 'work'), '--out', str(out)]
        )
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    table, compiled, seed1 = (json.loads(line) for line in out.read_text().splitlines())
    assert (table['backend'], compiled['backend'], table['iters']) == ('table', 'compiled', 2)
    assert len(table['losses']) == 2 and table['losses'] == pytest.approx(compiled['losses'], rel=1e-4)
    assert (table['seed'], seed1['seed']) == (0, 1) and seed1['losses'] != pytest.approx(table['losses'], rel=1e-4)
