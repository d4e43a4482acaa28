"""Bad input at every tool that reads files or builds a model (issue 41, items 2 and 3): one line naming the
argument and what is wrong, status 2 (`mmrecvit.inputs.bad_input`), never a traceback.

Kinds: a missing file, a photo where a checkpoint or a config goes, a text file where an image goes, a misspelt
backbone argument (`--cfg-options`, a benchmark spec) and an unknown `type`.
"""

import os.path as osp
import sys

import cv2
import numpy as np
import pytest
from helpers import REPO, bad_input_line

for folder in ('', 'analysis_tools', 'deployment', 'misc', 'model_converters'):
    sys.path.insert(0, osp.join(REPO, 'tools', folder))
import benchmark  # noqa: E402  (tools/analysis_tools/benchmark.py)
import compute_curve  # noqa: E402
import d2_train_net  # noqa: E402  (tools/d2_train_net.py)
import dry_run  # noqa: E402
import fold_revit  # noqa: E402
import gen_metafile  # noqa: E402
import get_flops  # noqa: E402
import init_distance  # noqa: E402
import padding_effect  # noqa: E402
import pytorch2onnx  # noqa: E402
import test as test_tool  # noqa: E402  (tools/test.py)
import timm2mmrecvit  # noqa: E402
import train as train_tool  # noqa: E402  (tools/train.py)
import visualize_depth  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread')
SEG = osp.join(REPO, 'configs/seg/upernet_morvit-ti_1xb4-150it_toy-ade20k-256x256.py')
DET = osp.join(REPO, 'configs/det/mask-rcnn_edgerecvit-ti_fpn_1xb2-800it_toy-coco.py')
PNG = 'is an image (PNG), not a checkpoint; pass a .pth/.safetensors file'


@pytest.fixture
def files(tmp_path):
    """A photo, a text file and a path that does not exist."""
    photo = tmp_path / 'photo.png'
    cv2.imwrite(str(photo), np.zeros((16, 16, 3), np.uint8))
    notes = tmp_path / 'notes.txt'
    notes.write_text('not an image\n')
    return dict(photo=str(photo), notes=str(notes), missing=str(tmp_path / 'missing.py'), tmp=tmp_path)


def test_visualize_depth_with_the_checkpoint_forgotten_names_the_photo(files, capsys):
    """The issue's case: `visualize_depth.py CONFIG photo.png` took the photo as the checkpoint."""
    line = bad_input_line(capsys, lambda: visualize_depth.main([SEG, files['photo']]))
    tool = 'tools/analysis_tools/visualize_depth.py'
    assert line == f"{tool}: error: CHECKPOINT '{files['photo']}' {PNG} or none (random weights)"


@pytest.mark.parametrize('kind', ['missing', 'notes'])
def test_visualize_depth_refuses_a_missing_or_non_image_image(files, kind, capsys):
    line = bad_input_line(capsys, lambda: visualize_depth.main([SEG, 'none', files[kind]]))
    what = (
        ': no such file'
        if kind == 'missing'
        else ' is a text file, not an image OpenCV reads (JPEG, PNG, BMP, TIFF, ...)'
    )
    assert line == f"tools/analysis_tools/visualize_depth.py: error: IMAGE '{files[kind]}'{what}"


def test_get_flops_names_its_image_and_checkpoint_options(files, capsys):
    line = bad_input_line(capsys, lambda: get_flops.main([SEG, '--image', files['notes']]))
    assert line == (
        f"tools/analysis_tools/get_flops.py: error: --image '{files['notes']}' is a text file, not an image OpenCV "
        'reads (JPEG, PNG, BMP, TIFF, ...)'
    )
    line = bad_input_line(capsys, lambda: get_flops.main([SEG, '--checkpoint', files['photo']]))
    assert line == f"tools/analysis_tools/get_flops.py: error: --checkpoint '{files['photo']}' {PNG}"


def test_train_and_test_name_a_missing_or_wrong_config_and_checkpoint(files, capsys):
    work = ['--work-dir', str(files['tmp'] / 'work')]
    line = bad_input_line(capsys, lambda: train_tool.main([files['missing'], *work]))
    assert line == f"train.py: error: CONFIG '{files['missing']}': no such file"
    line = bad_input_line(capsys, lambda: train_tool.main([files['photo'], *work]))
    assert (
        line == f"train.py: error: CONFIG '{files['photo']}' is an image (PNG), not a config (.py, .json, .yaml, .yml)"
    )
    line = bad_input_line(capsys, lambda: train_tool.main([SEG, '--resume', files['photo'], *work]))
    assert line == f"train.py: error: --resume '{files['photo']}' {PNG}"
    line = bad_input_line(capsys, lambda: test_tool.main([SEG, files['photo'], *work]))
    assert line == f"test.py: error: CHECKPOINT '{files['photo']}' {PNG}"


def test_export_and_compute_curve_name_a_photo_given_as_checkpoint(files, capsys):
    line = bad_input_line(capsys, lambda: pytorch2onnx.main([SEG, files['photo'], '--shape', '64', '64']))
    assert (
        line == f"tools/deployment/pytorch2onnx.py: error: CHECKPOINT '{files['photo']}' {PNG} or none (random weights)"
    )
    line = bad_input_line(capsys, lambda: compute_curve.main([SEG, files['photo'], '--out-dir', str(files['tmp'])]))
    assert (
        line
        == f"tools/analysis_tools/compute_curve.py: error: CHECKPOINT '{files['photo']}' {PNG} or none (random weights)"
    )


def test_padding_effect_and_dry_run_name_a_missing_config(files, capsys):
    line = bad_input_line(capsys, lambda: padding_effect.main([files['missing'], 'none']))
    assert line == f"tools/analysis_tools/padding_effect.py: error: CONFIG '{files['missing']}': no such file"
    line = bad_input_line(capsys, lambda: dry_run.main([files['missing'], '--no-progress']))
    assert line == f"tools/analysis_tools/dry_run.py: error: CONFIG '{files['missing']}': no such file"


def test_init_distance_names_a_photo_and_an_unknown_timm_model(files, capsys):
    line = bad_input_line(capsys, lambda: init_distance.main([files['photo']]))
    assert line == f"tools/analysis_tools/init_distance.py: error: CHECKPOINT '{files['photo']}' {PNG}"
    line = bad_input_line(capsys, lambda: init_distance.main(['timm:vit_smal_patch16_224']))
    assert line.startswith(
        "tools/analysis_tools/init_distance.py: error: CHECKPOINT 'timm:vit_smal_patch16_224': timm has no model "
        "'vit_smal_patch16_224'; closest: vit_small_patch16_224"
    ), line


def test_gen_metafile_names_a_missing_config_and_an_empty_scores_folder(files, capsys):
    out = ['--out', str(files['tmp'] / 'm.yml')]
    line = bad_input_line(capsys, lambda: gen_metafile.main(['--configs', files['missing'], *out]))
    assert line == f"tools/misc/gen_metafile.py: error: --configs '{files['missing']}': no such file"
    line = bad_input_line(capsys, lambda: gen_metafile.main(['--configs', SEG, '--scores', str(files['tmp']), *out]))
    why = 'no */scores.json there (tools/demo.py writes them)'
    assert line == f'tools/misc/gen_metafile.py: error: --scores {files["tmp"]}: {why}'


def test_converters_name_a_photo_and_a_missing_config(files, capsys):
    out = str(files['tmp'] / 'out.pth')
    line = bad_input_line(capsys, lambda: fold_revit.main([files['photo'], out, '--depth', '4']))
    assert line == f"tools/model_converters/fold_revit.py: error: CHECKPOINT '{files['photo']}' {PNG}"
    line = bad_input_line(capsys, lambda: timm2mmrecvit.main([files['photo'], out, '--model', 'PlainViT(arch="tiny")']))
    assert line == f"tools/model_converters/timm2mmrecvit.py: error: SRC '{files['photo']}' {PNG}"
    line = bad_input_line(capsys, lambda: timm2mmrecvit.main([files['photo'], out, '--config', files['missing']]))
    assert line.startswith('tools/model_converters/timm2mmrecvit.py: error: SRC')  # the first bad argument
    assert not osp.exists(out)


def test_d2_train_net_names_a_missing_config(files, capsys, monkeypatch):
    monkeypatch.setattr(sys, 'argv', ['d2_train_net.py', '--config-file', files['missing']])
    line = bad_input_line(capsys, d2_train_net.invoke_main)
    assert line == f"d2_train_net.py: error: --config-file '{files['missing']}': no such file"


# ---- item 2: a misspelt argument, an unknown type ------------------------------------------------------------
def test_train_with_a_misspelt_backbone_argument_prints_one_line_naming_the_closest(files, capsys):
    work = ['--work-dir', str(files['tmp'] / 'work')]
    run = lambda o: train_tool.main([SEG, *work, '--cfg-options', o])  # noqa: E731
    line = bad_input_line(capsys, lambda: run('model.backbone.num_recursion=3'))
    assert line == "train.py: error: MoRViT got an unknown argument 'num_recursion' (closest: 'num_recursions')"
    line = bad_input_line(capsys, lambda: run('model.backbone.type=SRVit'))
    assert line == "train.py: error: type='SRVit' is not in the mmseg::model registry; closest: 'SRViT', 'ReViT', 'SVT'"


def test_test_tool_with_a_misspelt_argument_prints_one_line(files, capsys):
    ckpt = files['tmp'] / 'x.pth'
    import torch

    torch.save({'state_dict': {}}, ckpt)
    run = [DET, str(ckpt), '--work-dir', str(files['tmp'] / 'w'), '--cfg-options', 'model.backbone.max_dept=4']
    line = bad_input_line(capsys, lambda: test_tool.main(run))
    assert line == "test.py: error: EdgeRecViT got an unknown argument 'max_dept' (closest: 'max_depth', 'depth')"


def test_benchmark_with_a_misspelt_argument_names_the_closest(capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        benchmark.main(['SRViT(arch="tiny", num_recursion=3)', '--repeats', '0', '--no-progress'])
    assert info.value.code == 2
    line = capsys.readouterr().err.splitlines()[-1]
    assert line.endswith("SRViT got an unknown argument 'num_recursion' (closest: 'num_recursions', 'eval_recursions')")
    line = bad_input_line(capsys, lambda: benchmark.main([f'{SEG}(whole=True, type="MoRVit")', '--no-progress']))
    unknown = "type='MoRVit' is not in the mmseg::model registry; closest: 'MoRViT', 'SRViT', 'ReViT'"
    assert line == f'tools/analysis_tools/benchmark.py: error: {unknown}'
