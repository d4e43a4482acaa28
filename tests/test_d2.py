"""detectron2 adapter (issue 21): every backbone as a detectron2 Backbone with the mm backbone's features,
strict checkpoints both ways, aux losses in the loss dict and statistics in the EventStorage, recursion-aware
layer decay, the recipes, and a toy Mask R-CNN of every method trained and scored by COCOEvaluator.

detectron2 is part of the set-up (scripts/setup.sh), so it is imported, not skipped."""
import ast
import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from backbone_cases import BACKBONE_CASES
from conftest import REPO
from detectron2.config import LazyCall as L
from detectron2.config import LazyConfig, instantiate
from detectron2.modeling import BACKBONE_REGISTRY
from detectron2.modeling.backbone.vit import get_vit_lr_decay_rate
from detectron2.structures import BitMasks, Boxes, Instances
from detectron2.utils.events import EventStorage

from mmrecvit import models
from mmrecvit.d2 import D2_BACKBONES, export_backbone, layer_decay_lr_factor, load_backbone, optimizer_params
from mmrecvit.d2.checkpoint import recvit_backbone
from mmrecvit.d2.train import do_train
from mmrecvit.models.checkpoint import CheckpointError

pytestmark = pytest.mark.usefixtures('one_thread')
METHODS = {'PlainViT': 'plainvit', 'NaiveRecursiveViT': 'naiverecvit', 'SRViT': 'srvit', 'ReViT': 'revit',
           'EdgeRecViT': 'edgerecvit', 'MoRViT': 'morvit'}
TOY = f'{REPO}/configs/d2/toy/mask_rcnn_{{}}_ti_toy_coco.py'


def mm_backbone(name, **kw):
    from mmdet.registry import MODELS

    import mmrecvit  # noqa: F401  (registers the backbones into mmdet)
    return MODELS.build(dict(type=name, **BACKBONE_CASES[name], **kw))


def save(obj, tmp_path, name='ckpt.pth'):
    path = tmp_path / name
    torch.save(obj, path)
    return str(path)


def as_detector_checkpoint(backbone):
    """An mmengine checkpoint of a detector holding `backbone` (neck and head keys the filter must drop)."""
    sd = {f'backbone.{k}': v for k, v in backbone.state_dict().items()}
    sd.update({'neck.0.lateral.weight': torch.zeros(2), 'rpn_head.rpn_conv.weight': torch.zeros(2)})
    return {'meta': {'epoch': 1}, 'state_dict': sd}


def test_every_backbone_is_a_registered_detectron2_backbone():
    assert list(D2_BACKBONES) == list(models.BACKBONES)
    for name, cls in D2_BACKBONES.items():
        assert BACKBONE_REGISTRY.get(name) is cls and cls.core is models.BACKBONES[name]
        bb = cls(**BACKBONE_CASES[name], square_pad=64)
        shapes = bb.output_shape()
        assert list(shapes) == [f'step{t}' for t in bb.net.out_indices]
        assert {(s.channels, s.stride) for s in shapes.values()} == {(bb.net.embed_dim, 16)}
        assert bb.size_divisibility == 16
        assert bb.padding_constraints == {'size_divisibility': 16, 'square_size': 64}
    with pytest.raises(ValueError, match="out_type must be 'featmap'"):
        D2_BACKBONES['PlainViT'](**BACKBONE_CASES['PlainViT'], out_type='cls_token')


@pytest.mark.parametrize('name', list(BACKBONE_CASES))
def test_features_equal_the_mmdet_backbones_for_the_same_weights(name, tmp_path):
    mm = mm_backbone(name).eval()
    path = save(as_detector_checkpoint(mm), tmp_path)
    d2 = D2_BACKBONES[name](**BACKBONE_CASES[name], pretrained=path).eval()  # strict, through the one filter
    x = torch.randn(2, 3, 70, 90)  # odd size: both pad to the patch grid
    with torch.no_grad():
        ref, out = mm(x), d2(x)
    assert list(out) == [f'step{t}' for t in mm.out_indices] and len(ref) == len(out) == 4
    for r, o in zip(ref, out.values()):
        assert o.shape == (2, mm.embed_dim, 5, 6)
        torch.testing.assert_close(o, r, rtol=0, atol=0)


@pytest.mark.parametrize('name', list(BACKBONE_CASES))
def test_checkpoint_round_trip_mm_to_d2_to_mm_is_strict(name, tmp_path):
    mm = mm_backbone(name)
    d2 = D2_BACKBONES[name](**BACKBONE_CASES[name])
    load_backbone(d2, save(as_detector_checkpoint(mm), tmp_path))
    back = tmp_path / 'back.pth'
    export_backbone(d2, back)
    again = mm_backbone(name, init_cfg=dict(type='Pretrained', checkpoint=str(back)))
    again.init_weights()
    ref = mm.state_dict()
    assert set(again.state_dict()) == set(ref)
    for k, v in again.state_dict().items():
        assert torch.equal(v, ref[k]), k
    bad = as_detector_checkpoint(mm)
    bad['state_dict']['backbone.extra.weight'] = torch.zeros(1)
    with pytest.raises(CheckpointError, match='unexpected keys.*extra.weight'):
        load_backbone(d2, save(bad, tmp_path, 'bad.pth'))


@pytest.mark.parametrize('name', ['PlainViT', 'MoRViT'])
def test_a_classifier_checkpoint_loads_strictly(name, tmp_path):
    cls = mm_backbone(name, out_type='cls_token')  # final norm; mmpretrain's layout adds a head
    sd = {f'backbone.{k}': v for k, v in cls.state_dict().items()}
    sd['head.layers.head.weight'] = torch.zeros(5, cls.embed_dim)
    d2 = D2_BACKBONES[name](**BACKBONE_CASES[name], pretrained=save({'state_dict': sd}, tmp_path))
    for k, v in d2.net.state_dict().items():
        assert torch.equal(v, sd[f'backbone.{k}']), k


def test_timm_weights_load_through_the_same_filter(tmp_path):
    from timm.models.vision_transformer import VisionTransformer

    case = BACKBONE_CASES['PlainViT']
    timm = VisionTransformer(img_size=case['img_size'], patch_size=16, embed_dim=case['embed_dim'],
                             depth=case['depth'], num_heads=case['num_heads'], num_classes=10)
    path = save({'model': timm.state_dict()}, tmp_path)  # DeiT's layout
    d2 = D2_BACKBONES['PlainViT'](**case, pretrained=path)
    core = models.PlainViT(**case, pretrained=path)
    core.init_weights()
    for k, v in core.state_dict().items():
        assert torch.equal(d2.net.state_dict()[k], v), k
    assert torch.equal(d2.net.blocks[2].mlp.fc1.weight, timm.blocks[2].mlp.fc1.weight)


def toy_cfg(method, root, tmp_path, iters=2, size=128, config=None):
    """A toy LazyConfig (`config`, default the method's Mask R-CNN toy) on the test's small toy set, `iters`
    iterations at `size` px, evaluated at the end."""
    cfg = LazyConfig.load(config or TOY.format(method))
    cfg = LazyConfig.apply_overrides(cfg, [
        f'dataloader.train.dataset.names.root={root}/toy_coco', f'dataloader.test.dataset.names.root={root}/toy_coco',
        f'train.max_iter={iters}', f'train.eval_period={iters}', f'train.checkpointer.period={iters}',
        'train.log_period=1', f'train.output_dir={tmp_path}', 'dataloader.train.num_workers=0',
        'dataloader.test.num_workers=0'])
    for aug in (cfg.dataloader.train.mapper.augmentations[0], cfg.dataloader.test.mapper.augmentations[0]):
        aug.short_edge_length = aug.max_size = size
    cfg.model.backbone.square_pad = size
    return cfg


def toy_batch(size=128):
    """Two images with two objects each, as detectron2's DatasetMapper gives them."""
    batch = []
    for i in range(2):
        inst = Instances((size, size))
        boxes = torch.tensor([[10.0, 12.0, 60.0, 70.0], [64.0, 40.0, 120.0, 100.0]])
        inst.gt_boxes, inst.gt_classes = Boxes(boxes), torch.tensor([i, 3])
        masks = torch.zeros(2, size, size, dtype=torch.bool)
        for m, (x0, y0, x1, y1) in zip(masks, boxes.int().tolist()):
            m[y0:y1, x0:x1] = True
        inst.gt_masks = BitMasks(masks)
        batch.append({'image': torch.randint(0, 255, (3, size, size), dtype=torch.uint8), 'instances': inst})
    return batch


@pytest.mark.parametrize('method', list(METHODS.values()))
def test_aux_losses_reach_the_loss_dict_and_statistics_the_event_storage(method, tmp_path):
    cfg = toy_cfg(method, tmp_path, tmp_path)
    model = instantiate(cfg.model).train()
    with EventStorage() as storage:
        losses = model(toy_batch())
        stats = recvit_backbone(model).stats
    assert {'loss_cls', 'loss_box_reg', 'loss_mask', 'loss_rpn_cls', 'loss_rpn_loc'} <= set(losses)
    assert set(stats.aux_losses) <= set(losses) and set(stats.scalars) <= set(storage.latest())
    for k, v in stats.aux_losses.items():
        assert losses[k] is v and v.requires_grad
    for k, v in stats.scalars.items():
        assert storage.latest()[k][0] == pytest.approx(v.item())
    if method in ('srvit', 'edgerecvit', 'morvit'):  # the methods with routers report something
        assert stats.scalars
    if method == 'morvit':  # its router BCE trains the routers through the detector's total loss
        assert stats.aux_losses
        sum(losses.values()).backward()
        routers = [p for n, p in model.named_parameters() if 'router' in n]
        assert routers and all(p.grad is not None for p in routers)


def test_layer_decay_uses_the_backbones_recursion_aware_depths():
    cfg = LazyConfig.load(TOY.format('naiverecvit'))
    cfg.model.backbone.net.update(pretrained=None)
    model = instantiate(cfg.model)
    bb = recvit_backbone(model)
    factor = layer_decay_lr_factor(model, 0.7)
    for name, _ in model.named_parameters():
        if name.startswith('backbone.net.net.'):
            own = name[len('backbone.net.net.'):]
            assert factor(name) == pytest.approx(0.7 ** (bb.num_layers - bb.layer_depth(own))), name
        else:
            assert factor(name) == 1.0, name
    # block 0 of 2 runs at steps 0, 2, 4 (positions 1, 3, 5): the mean depth 3, not detectron2's name-parsed 1
    assert factor('backbone.net.net.blocks.0.attn.qkv.weight') == pytest.approx(0.7 ** (bb.num_layers - 3))
    groups = optimizer_params(model, base_lr=1e-3, layer_decay_rate=0.7, weight_decay_norm=0.0)
    lrs = {id(p): g['lr'] for g in groups for p in g['params']}
    for name, p in model.named_parameters():
        assert lrs[id(p)] == pytest.approx(1e-3 * factor(name)), name


def test_on_a_plain_vit_the_depths_are_vitdets():
    """PlainViT's layer depths give detectron2's get_vit_lr_decay_rate (which has no CLS token)."""
    model = instantiate(LazyConfig.load(TOY.format('plainvit')).model)
    depth = recvit_backbone(model).depth
    factor = layer_decay_lr_factor(model, 0.7)
    for name, _ in model.named_parameters():
        if 'cls_token' not in name:
            assert factor(name) == pytest.approx(get_vit_lr_decay_rate(name, 0.7, depth)), name


@pytest.mark.parametrize('path', [f'{REPO}/configs/d2/mask_rcnn_srvit_s_100ep.py',
                                  f'{REPO}/configs/d2/cascade_mask_rcnn_morvit_s_100ep.py'])
def test_recipe_builds_and_trains_a_step_at_tiny_size(path):
    """The COCO recipes' models (the ViTDet heads, Cascade's three stages) at a tiny backbone, proposals and RoIs."""
    cfg = LazyConfig.load(path)
    name = cfg.model.backbone.net._target_.__name__
    cfg.model.backbone.net = L(D2_BACKBONES[name])(**BACKBONE_CASES[name])
    cfg.model.backbone.square_pad = 128
    cfg.model.proposal_generator.post_nms_topk = (64, 64)
    cfg.model.roi_heads.batch_size_per_image = 16
    model = instantiate(cfg.model).train()
    with EventStorage():
        losses = model(toy_batch())
    stages = ('_stage0', '_stage1', '_stage2') if 'cascade' in path else ('',)
    assert {f'loss_{k}{s}' for k in ('cls', 'box_reg') for s in stages} | {'loss_mask'} <= set(losses)
    assert all(torch.isfinite(v) for v in losses.values())


def check_scored(results):
    for task in ('bbox', 'segm'):
        ap = results[task]['AP']
        assert isinstance(ap, float) and 0.0 <= ap <= 100.0 and not math.isnan(ap), results


@pytest.mark.slow
@pytest.mark.parametrize('method', [m for m in METHODS.values() if m != 'plainvit'])
def test_toy_mask_rcnn_trains_and_cocoevaluator_scores_it(method, toy_root, tmp_path):
    results = do_train(toy_cfg(method, toy_root, tmp_path))
    check_scored(results)
    metrics = [json.loads(line) for line in (tmp_path / 'metrics.json').read_text().splitlines()]
    assert [m['iteration'] for m in metrics if 'total_loss' in m] == [0, 1]
    assert (tmp_path / 'model_final.pth').is_file()


@pytest.mark.slow
def test_the_cascade_toy_trains_its_three_stages_and_cocoevaluator_scores_it(toy_root, tmp_path):
    config = f'{REPO}/configs/d2/toy/cascade_mask_rcnn_plainvit_ti_toy_coco.py'
    check_scored(do_train(toy_cfg('plainvit', toy_root, tmp_path, config=config)))
    metrics = [json.loads(line) for line in (tmp_path / 'metrics.json').read_text().splitlines()]
    losses = next(m for m in metrics if 'total_loss' in m)
    assert {f'loss_box_reg_stage{i}' for i in range(3)} <= set(losses) and 'loss_mask' in losses


@pytest.mark.slow
def test_the_entry_point_trains_and_evaluates_plainvit(toy_root, tmp_path):
    cfg = toy_cfg('plainvit', toy_root, tmp_path)
    overrides = [f'{k}={v}' for k, v in (
        ('dataloader.train.dataset.names.root', f'{toy_root}/toy_coco'),
        ('dataloader.test.dataset.names.root', f'{toy_root}/toy_coco'),
        ('train.max_iter', 2), ('train.eval_period', 2), ('train.checkpointer.period', 2), ('train.log_period', 1),
        ('train.output_dir', tmp_path), ('dataloader.train.num_workers', 0), ('dataloader.test.num_workers', 0),
        ('dataloader.train.mapper.augmentations.0.short_edge_length', 128),
        ('dataloader.train.mapper.augmentations.0.max_size', 128),
        ('dataloader.test.mapper.augmentations.0.short_edge_length', 128),
        ('dataloader.test.mapper.augmentations.0.max_size', 128), ('model.backbone.square_pad', 128))]
    assert cfg.model.backbone.square_pad == 128  # the same settings as the in-process runs
    losses = []
    for run in ('again', ''):  # the toy is seeded: a second run gives the same losses
        out = tmp_path / run
        res = subprocess.run([sys.executable, 'tools/d2_train_net.py', '--config-file', TOY.format('plainvit'),
                              *overrides, f'train.output_dir={out}'], cwd=REPO, capture_output=True, text=True,
                             timeout=300, env={'OMP_NUM_THREADS': '1', 'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path)})
        assert res.returncode == 0, res.stderr[-3000:]
        check_scored(json.loads((out / 'eval.json').read_text()))
        losses.append([json.loads(line)['total_loss'] for line in (out / 'metrics.json').read_text().splitlines()
                       if 'total_loss' in line])
    assert len(losses[0]) == 2 and losses[0] == losses[1]
    # the checkpoint is detectron2's and loads back for --eval-only
    res = subprocess.run([sys.executable, 'tools/d2_train_net.py', '--config-file', TOY.format('plainvit'),
                          '--eval-only', *overrides, f'train.init_checkpoint={tmp_path}/model_final.pth'],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={'OMP_NUM_THREADS': '1', 'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path)})
    assert res.returncode == 0, res.stderr[-3000:]
    check_scored(json.loads((tmp_path / 'eval.json').read_text()))


def test_without_detectron2_the_adapter_says_how_to_install_it(monkeypatch):
    for mod in [m for m in sys.modules if m == 'mmrecvit.d2' or m.startswith('mmrecvit.d2.')]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, 'detectron2', None)  # `import detectron2` raises ImportError
    with pytest.raises(ImportError, match=r'needs detectron2.*bash scripts/setup\.sh.*facebookresearch/detectron2'):
        importlib.import_module('mmrecvit.d2')


def test_nothing_else_in_the_package_needs_detectron2():
    """No module outside mmrecvit/d2 imports it, and all of them import with it blocked (mmpretrain itself
    imports detectron2 when it is installed, so the check blocks it rather than looks for it)."""
    for path in Path(REPO, 'mmrecvit').rglob('*.py'):
        if 'd2' not in path.relative_to(REPO).parts:
            tree = ast.parse(path.read_text())
            names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
            names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
            assert not [n for n in names if n.split('.')[0] == 'detectron2'], path
    code = ('import importlib, pathlib, sys\n'
            'sys.modules["detectron2"] = None\n'
            'for f in sorted(pathlib.Path("mmrecvit").rglob("*.py")):\n'
            '    name = ".".join(f.with_suffix("").parts).removesuffix(".__init__")\n'
            '    if not name.startswith("mmrecvit.d2"):\n'
            '        importlib.import_module(name)\n')
    res = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
