"""The model converters: tools/model_converters/fold_revit.py (reViT -> dense ViT, parity before writing)
and timm2mmrecvit.py (every backbone from a timm checkpoint, parity-checked)."""

import ast
import importlib.util
import os
import os.path as osp
import sys
from unittest import mock

import pytest
import torch
from backbone_cases import BACKBONE_CASES, program_router, tiny_revit
from helpers import REPO, bad_input_line
from timm.models.vision_transformer import VisionTransformer

from mmrecvit.models import PlainViT
from mmrecvit.models.revit_fold import fold_to_plainvit

sys.path.insert(0, osp.join(REPO, 'tools', 'analysis_tools'))
sys.path.insert(0, osp.join(REPO, 'tools', 'model_converters'))
sys.path.insert(0, osp.join(REPO, 'tools', 'misc'))
import timm2mmrecvit  # noqa: E402  (tools/model_converters/timm2mmrecvit.py)

from mmrecvit.models import checkpoint as checkpoint_module  # noqa: E402

pytestmark = pytest.mark.usefixtures('one_thread')

TINY = dict(arch='tiny', embed_dim=32, num_heads=2, img_size=64)

ROOT = REPO


# ---- the fold CLI ------------------------------------------------------------------------------
def load_cli():
    path = os.path.join(ROOT, 'tools', 'model_converters', 'fold_revit.py')
    spec = importlib.util.spec_from_file_location('fold_revit', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def printed_backbone(stdout):
    """The `model.backbone = dict(...)` line the tool prints, as constructor kwargs."""
    line = next(ln for ln in stdout.splitlines() if ln.startswith('model.backbone = dict('))
    call = ast.parse(line.split('=', 1)[1].strip(), mode='eval').body
    return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}


def test_fold_cli_on_a_training_checkpoint(tmp_path, capsys):
    revit = program_router(tiny_revit(depth=6)).eval()
    neck = torch.randn(4, 4)
    sd = {**{'backbone.' + k: v for k, v in revit.state_dict().items()}, 'neck.conv.weight': neck}
    meta = {'dataset_meta': {'classes': ['a', 'b']}, 'cfg': 'old config text'}
    torch.save({'meta': meta, 'state_dict': sd, 'optimizer': {'state': {}}}, tmp_path / 'epoch_1.pth')
    out = tmp_path / 'folded' / 'revit_l5.pth'
    assert load_cli().main([str(tmp_path / 'epoch_1.pth'), '--depth', '5', str(out), '--num-heads', '2']) == 0

    stdout = capsys.readouterr().out
    kwargs = printed_backbone(stdout)
    assert kwargs.pop('type') == 'PlainViT' and kwargs['depth'] == 5
    saved = torch.load(out, weights_only=True)
    assert sorted(saved) == ['meta', 'state_dict']
    assert saved['meta']['dataset_meta'] == meta['dataset_meta'] and 'cfg' not in saved['meta']
    assert torch.equal(saved['state_dict']['neck.conv.weight'], neck)
    dense = PlainViT(**kwargs).eval()
    dense.load_state_dict(
        {k[len('backbone.') :]: v for k, v in saved['state_dict'].items() if k.startswith('backbone.')}, strict=True
    )
    revit.depth = 5
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        for a, b in zip(revit(x), dense(x)):
            torch.testing.assert_close(b, a, rtol=0, atol=1e-5)
    n_revit = sum(v.numel() for v in revit.state_dict().values())
    n_dense = sum(v.numel() for v in dense.state_dict().values())
    assert f'reViT backbone {n_revit:,}' in stdout and f'folded PlainViT backbone {n_dense:,}' in stdout


def test_fold_cli_with_config_and_raw_backbone(tmp_path, capsys):
    revit = program_router(tiny_revit(depth=6, out_indices=[2, 5])).eval()
    torch.save(revit.state_dict(), tmp_path / 'revit.pth')
    cfg = tmp_path / 'cfg.py'
    cfg.write_text(
        "model = dict(type='EncoderDecoder', backbone=dict(type='ReViT', arch='tiny', embed_dim=32, "
        "num_heads=2, img_size=64, depth=6, num_experts=3, out_indices=[2, 5], pretrained='x.pth'))\n"
    )
    cli = load_cli()
    cli.main([str(tmp_path / 'revit.pth'), '--depth', '4', str(tmp_path / 'dense.pth'), '--config', str(cfg)])
    kwargs = printed_backbone(capsys.readouterr().out)
    assert kwargs['out_indices'] == [1, 3]
    dense = PlainViT(**{k: v for k, v in kwargs.items() if k != 'type'})
    dense.load_state_dict(torch.load(tmp_path / 'dense.pth', weights_only=True), strict=True)

    line = bad_input_line(
        capsys, lambda: cli.main([str(tmp_path / 'revit.pth'), '--depth', '4', str(tmp_path / 'x.pth')])
    )
    assert '--num-heads' in line  # width 32 is not a DeiT size


def test_fold_cli_checks_parity_before_writing(tmp_path):
    torch.save(tiny_revit().state_dict(), tmp_path / 'revit.pth')
    cli = load_cli()

    def broken_fold(revit, depth):
        dense = fold_to_plainvit(revit, depth)
        with torch.no_grad():
            dense.blocks[1].mlp.fc2.bias.add_(1e-3)
        return dense

    out = tmp_path / 'dense.pth'
    with mock.patch.object(cli, 'fold_to_plainvit', broken_fold), pytest.raises(SystemExit, match='parity'):
        cli.main([str(tmp_path / 'revit.pth'), '--depth', '3', str(out), '--num-heads', '2'])
    assert not out.exists()


# ---- timm2mmrecvit ------------------------------------------------------------------------------
CONVERT_OVERRIDES = {'PlainViT': dict(depth=6), 'EdgeRecViT': dict(shared_init_block=3)}


@pytest.fixture(scope='module')
def timm_source(tmp_path_factory):
    """A random timm ViT (6 blocks, D=32, 64 px) saved as DeiT does ({'model': ...})."""

    torch.manual_seed(0)
    ref = VisionTransformer(img_size=64, patch_size=16, embed_dim=32, depth=6, num_heads=2, num_classes=10).eval()
    path = tmp_path_factory.mktemp('timm') / 'deit_random.pth'
    torch.save({'model': ref.state_dict()}, path)
    return ref, str(path)


def spec(name: str, kwargs: dict) -> str:
    return f'{name}({", ".join(f"{k}={v!r}" for k, v in kwargs.items())})'


@pytest.mark.parametrize('name', sorted(BACKBONE_CASES))
def test_timm2mmrecvit_converts_every_backbone_end_to_end(name, timm_source, tmp_path):
    ref, src = timm_source
    kwargs = {**BACKBONE_CASES[name], **CONVERT_OVERRIDES.get(name, {})}
    dst = tmp_path / 'init.pth'
    meta = timm2mmrecvit.main([src, str(dst), '--model', spec(name, kwargs)])
    assert meta['check'].startswith('parity' if name in ('PlainViT', 'SRViT') else f'{name} does not compute DeiT')
    model = timm2mmrecvit.BACKBONES[name](**kwargs, init_cfg=dict(type='Pretrained', checkpoint=str(dst)))
    model.init_weights()  # the file works in a config's init_cfg
    model.eval()
    if name == 'PlainViT':  # independent of the tool: block outputs equal timm's on another input
        x = torch.randn(1, 3, 64, 64)
        with torch.no_grad():
            ours = model.forward_intermediates(x, list(range(6)), intermediates_only=True)
            theirs = ref.forward_intermediates(x, indices=list(range(6)), norm=False, intermediates_only=True)
        assert all((a - b).abs().max() < 1e-5 for a, b in zip(ours, theirs))
    if name == 'SRViT':  # block i <- DeiT block i, whatever T
        assert torch.equal(model.blocks[4].mlp.fc2.weight, ref.blocks[4].mlp.fc2.weight)


def test_timm2mmrecvit_parity_catches_a_wrong_key_map(timm_source, tmp_path, monkeypatch, capsys):
    _, src = timm_source

    def swapped(self, sd):  # blocks 0 and 1 exchanged: loads strictly, computes something else
        return {
            k.replace('blocks.0.', 'blocks.X.').replace('blocks.1.', 'blocks.0.').replace('blocks.X.', 'blocks.1.'): v
            for k, v in sd.items()
        }

    # PlainViT's keys are timm's: the key map is the identity after the classification keys are matched.
    original = checkpoint_module.match_classification_keys
    monkeypatch.setattr(
        checkpoint_module,
        'match_classification_keys',
        lambda sd, model, source: swapped(model, original(sd, model, source)),
    )
    dst = tmp_path / 'bad.pth'
    model = spec('PlainViT', dict(BACKBONE_CASES['PlainViT'], depth=6))
    line = bad_input_line(capsys, lambda: timm2mmrecvit.main([src, str(dst), '--model', model]))
    assert 'parity failed after timm block 0' in line
    assert not dst.exists()
