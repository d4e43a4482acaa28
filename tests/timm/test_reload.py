"""Reloads say what they need (issue 46.6; docs/timm.md, "Save and reload"): a model saved by timm (`save_for_hf`),
transformers (`save_pretrained`) or smp (`save_pretrained`) reloads in a fresh process with the one import the docs
give, `import mmrecvit`, to the same outputs; timm's config.json names the library, its version and that import."""

import inspect
import json
import sys

import pytest
import timm
import torch
from helpers import run
from timm.models import save_for_hf

import mmrecvit

transformers = pytest.importorskip('transformers')
smp = pytest.importorskip('segmentation_models_pytorch')
pytestmark = pytest.mark.usefixtures('one_thread')

# what the fresh process runs per framework: the docs' reload, then the output on the test's input
RELOAD = {
    'timm': "timm.create_model('local-dir:{dir}', pretrained=True).eval()",
    'transformers': 'transformers.TimmWrapperForImageClassification.from_pretrained({dir!r}).eval()',
    'upernet': 'transformers.UperNetForSemanticSegmentation.from_pretrained({dir!r}).eval()',
    'smp': 'smp.from_pretrained({dir!r}).eval()',
}


def saved_models(folder):
    """{framework: (folder it saved into, its output on `x`)}, each model saved by its framework's own call."""
    from transformers import (
        TimmBackboneConfig,
        TimmWrapperConfig,
        TimmWrapperForImageClassification,
        UperNetConfig,
        UperNetForSemanticSegmentation,
    )

    torch.manual_seed(0)
    backbone = TimmBackboneConfig(backbone='morvit_tiny_patch16_224', out_indices=(2, 5, 8, 11))
    models = {
        'timm': timm.create_model('srvit_tiny_patch16_224', num_classes=5, depth=6, num_recursions=2),
        'transformers': TimmWrapperForImageClassification(
            TimmWrapperConfig(architecture='revit_tiny_patch16_224', num_labels=3)
        ),
        'upernet': UperNetForSemanticSegmentation(
            UperNetConfig(backbone_config=backbone, num_labels=3, hidden_size=32, use_auxiliary_head=False)
        ),
        'smp': smp.DPT(encoder_name='tu-edgerecvit_tiny_patch16_224', encoder_weights=None, classes=3),
    }
    out = {}
    for name, model in models.items():
        path = str(folder / name)
        save_for_hf(model, path) if name == 'timm' else model.save_pretrained(path)
        out[name] = (path, output(model.eval()))
    return out


def output(model):
    with torch.no_grad():
        y = model(torch.linspace(-1, 1, 3 * 64 * 64).reshape(1, 3, 64, 64))
    y = getattr(y, 'logits', y)
    return y.double().sum().item(), y.double().abs().sum().item()


@pytest.mark.subprocess
def test_each_framework_reloads_in_a_fresh_process_after_import_mmrecvit(tmp_path):
    saved = saved_models(tmp_path)
    lines = [f'out[{name!r}] = output({RELOAD[name].format(dir=path)})' for name, (path, _) in saved.items()]
    code = '\n'.join(
        [
            'import json, torch, timm, transformers, segmentation_models_pytorch as smp',
            'import mmrecvit  # the one import the docs give',
            inspect.getsource(output),  # the same input and summary as here
            'out = {}',
            *lines,
            'print(json.dumps(out))',
        ]
    )
    done = run([sys.executable, '-c', code])
    assert done.returncode == 0, done.stderr[-3000:]
    reloaded = json.loads(done.stdout.strip().splitlines()[-1])
    for name, (_, expected) in saved.items():
        assert reloaded[name] == pytest.approx(expected, rel=1e-6), name


def test_timms_config_json_names_the_library_its_version_and_the_import(tmp_path):
    save_for_hf(timm.create_model('plainvit_tiny_patch16_224', depth=1), str(tmp_path))
    cfg = json.loads((tmp_path / 'config.json').read_text())
    assert cfg['architecture'] == 'plainvit_tiny_patch16_224'
    notes = cfg['pretrained_cfg']['notes']
    assert notes[:2] == ['library: mmrecvit', f'version: {mmrecvit.__version__}'] and 'import mmrecvit' in notes[2]
    assert f'mmrecvit {mmrecvit.__version__}' in cfg['pretrained_cfg']['description']
