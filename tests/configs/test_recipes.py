"""The paper-scale recipes (configs/det, configs/seg) say what they are meant to say.

* every real config starts its method where its paper starts (PlainViT and SR-ViT from DeiT, the others from their
  own ImageNet-1k checkpoint, as their classification recipe trains it); reViT trains at a fixed depth
  (step_drop_rate=0) except in its `-elastic` variants (the paper's 0.3);
* each recipe's window attention, activation checkpointing, layer-wise lr decay, optimizer, drop path, batch and
  schedule are the ones its header names (ViTDet's LSJ, ViT-Adapter's 3x and ADE20K, ...);
* the neck and head widths follow the backbone's width (S and B);
* the cascade recipe's stages are mmdet's cascade-mask-rcnn_r50_fpn.py's;
* seeding (diff_rank_seed in the real recipes, not in the toys), TF32, `LN2d`, the mask-merging TTA model and
  `tools/test.py --tta` end to end on toy configs.
Configs only load and build here (CPU): the GPU recipes' AMP is not run.
"""

import glob
import os.path as osp
import re
import sys

import pytest
import torch
from helpers import REPO, cached_config
from mmengine.config import Config, ConfigDict
from mmengine.registry import DefaultScope

from mmrecvit.mm.norm import LN2d
from mmrecvit.models import SimplePyramid
from mmrecvit.models.arguments import ARCH_SETTINGS, resolve_arch

sys.path.insert(0, osp.join(REPO, 'tools'))
from mmrecvit.models import BACKBONES

# The OpenMMLab configs (configs/d2/ holds detectron2 LazyConfigs: tests/d2/).
CONFIGS = sorted(p for task in ('cls', 'det', 'seg') for p in glob.glob(f'{REPO}/configs/{task}/*.py'))

# The dense-task recipes (det, seg); the classification ones have their own tests (test_cls.py).
DENSE = [p for p in CONFIGS if '/cls/' not in p]

REAL = [p for p in DENSE if '_toy-' not in p]

TOY = [p for p in DENSE if '_toy-' in p]

DEIT = {
    'tiny': 'checkpoints/deit_tiny_patch16_224-a1311bcf.pth',
    'small': 'checkpoints/deit_small_patch16_224-cd65a155.pth',
    'base': 'checkpoints/deit_base_patch16_224-b5f2ef4d.pth',
}

# Where each method's COCO/ADE20K recipes start (issues 37.1, 45): where its paper starts. PlainViT starts from DeiT's
# release; the others, SR-ViT included, from their own ImageNet-1k checkpoint, the output of one of their configs/cls
# recipes (`init_cfg.made_by` names it). The other families (docs/comparison.md) start elsewhere on purpose: the
# equal-budget PlainViT and Edge-RecViT from the same from-scratch recipe as every method, SR-ViT's DeiT control.
DEIT_STARTS = {'PlainViT': {}}
OWN_START = re.compile(r'checkpoints/(\w+)-(small|base)_(?:[\w-]+_)?in1k\.pth')
NOT_PAPER_STARTS = {  # recipe (its method's part of the file name) -> the start it takes instead
    'plainvit-s-in1k': 'configs/cls/plainvit-small_4xb256_in1k.py',
    'edgerecvit-s-scratch': 'configs/cls/edgerecvit-small_4xb256_in1k.py',
    'srvit-s-deit': 'DeiT release',
}
# The classifier's arguments a dense recipe may set otherwise: outputs, regularisers of training, the start itself,
# and the dense recipes' own choices for every method (ViTDet's windows, checkpointing, zero-initialised relative
# positions).
NOT_THE_FUNCTION = {'_delete_', 'out_type', 'drop_path_rate', 'step_drop_rate', 'init_cfg', 'shared_init'}
NOT_THE_FUNCTION |= {'router_init', 'window_size', 'with_cp', 'use_rel_pos'}
# The toys' arguments (they train from scratch; MoR-ViT's gates at scale 1.0: configs/_base_/backbones/morvit-toy.py).
TOY_ARGS = {'ReViT': {'step_drop_rate': 0.0}, 'MoRViT': {'router_alpha': 1.0}, 'SRViT': {'router_init': 'function'}}

ViTDET = dict(
    window_size=14,
    with_cp=True,
    layer_decay_rate=0.7,
    lr=1e-4,
    weight_decay=0.1,
    drop_path_rate=0.1,
    optim_wrapper='AmpOptimWrapper',
    batch=(16, 4),
    epochs=100,
)

# recipe base (file name) -> what its header promises
RECIPES = {
    'mask-rcnn_vit_fpn_1x_coco.py': dict(
        window_size=0,
        with_cp=False,
        layer_decay_rate=None,
        lr=1e-4,
        weight_decay=0.05,
        drop_path_rate=0.1,
        optim_wrapper='OptimWrapper',
        batch=(8, 2),
        epochs=12,
        arch='small',
    ),
    'mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py': dict(ViTDET, arch='small'),
    'mask-rcnn_vit-b_vitdet-fpn_16xb4-amp-lsj-100e_coco.py': dict(ViTDET, arch='base'),
    'mask-rcnn_vit-ti_vitdet-fpn_16xb4-amp-lsj-100e_coco.py': dict(ViTDET, arch='tiny'),  # the iso-parameter reference
    'cascade-mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py': dict(ViTDET, arch='small'),
    'mask-rcnn_vit_fpn_8xb2-ms-crop-3x_coco.py': dict(
        window_size=14,
        with_cp=False,
        layer_decay_rate=1.0,
        lr=1e-4,
        weight_decay=0.05,
        drop_path_rate=0.1,
        optim_wrapper='OptimWrapper',
        batch=(8, 2),
        epochs=36,
        arch='small',
    ),
    'upernet_vit_8xb2-160k_ade20k-512x512.py': dict(
        window_size=0,
        with_cp=False,
        layer_decay_rate=None,
        lr=6e-5,
        weight_decay=0.01,
        drop_path_rate=0.1,
        optim_wrapper='OptimWrapper',
        batch=(8, 2),
        iters=160000,
        arch='small',
    ),
    'upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py': dict(
        window_size=0,
        with_cp=False,
        layer_decay_rate=0.95,
        lr=6e-5,
        weight_decay=0.01,
        drop_path_rate=0.2,
        optim_wrapper='AmpOptimWrapper',
        batch=(8, 2),
        iters=160000,
        arch='small',
        slide=True,
    ),
    'upernet_vit-b_8xb2-amp-ld0.95-160k_ade20k-512x512.py': dict(
        window_size=0,
        with_cp=False,
        layer_decay_rate=0.95,
        lr=6e-5,
        weight_decay=0.01,
        drop_path_rate=0.3,
        optim_wrapper='AmpOptimWrapper',
        batch=(8, 2),
        iters=160000,
        arch='base',
        slide=True,
    ),
    'upernet_vit-ti_8xb2-amp-ld0.95-160k_ade20k-512x512.py': dict(
        window_size=0,
        with_cp=False,
        layer_decay_rate=0.95,
        lr=6e-5,
        weight_decay=0.01,
        drop_path_rate=0.1,
        optim_wrapper='AmpOptimWrapper',
        batch=(8, 2),
        iters=160000,
        arch='tiny',
        slide=True,
    ),
}


def rel(path):
    return osp.relpath(path, REPO)


def parent(path):
    """The recipe a per-method config's `_base_` names first (its second: the method's backbone file)."""
    base = Config._get_base_files(path)[0]
    return osp.normpath(osp.join(osp.dirname(path), base))


def recipe_of(path):
    """The `_base_/` recipe a per-method config (or its `-elastic` variant) stands on."""
    base = parent(path)
    return base if osp.basename(osp.dirname(base)) == '_base_' else parent(base)


load = cached_config  # one cache for every config test (tests/helpers.py)


def embed_dim_of(backbone):
    return resolve_arch(backbone.get('arch', 'small'), ARCH_SETTINGS, embed_dim=backbone.get('embed_dim'))['embed_dim']


# ---- the methods' choices ------------------------------------------------------------------------------
@pytest.mark.parametrize('path', REAL, ids=[rel(p) for p in REAL])
def test_each_recipe_starts_where_its_methods_paper_starts(path):
    cfg = load(path)
    backbone, variant = cfg.model.backbone, re.search(r'_(\w+-(?:s|b|ti)(?:-[\w]+)?)_', osp.basename(path)).group(1)
    declared = cfg.recipe.get('differs', {}).get('paper_start')
    if variant in NOT_PAPER_STARTS:  # another family's start, declared with which (compare.py --check)
        assert declared[0] == NOT_PAPER_STARTS[variant]
        start = NOT_PAPER_STARTS[variant]
        if start == 'DeiT release':
            assert backbone.init_cfg == dict(type='Pretrained', checkpoint=DEIT[backbone.arch])
        else:
            assert start in backbone.init_cfg.made_by
        return
    assert declared is None, rel(path)
    if backbone.type in DEIT_STARTS:
        assert backbone.init_cfg == dict(type='Pretrained', checkpoint=DEIT[backbone.arch])
    else:
        method, arch = OWN_START.fullmatch(backbone.init_cfg.checkpoint).groups()
        assert arch == backbone.arch and BACKBONES[backbone.type].short_name == method
        (cls_recipe,) = re.findall(r'configs/cls/\S+\.py', backbone.init_cfg.made_by)
        # the start its backbone file names its paper's (NaiveRecursiveViT: none, no paper)
        assert cfg.recipe.paper_start == (None if backbone.type == 'NaiveRecursiveViT' else cls_recipe)
        work_dir = osp.basename(backbone.init_cfg.checkpoint)[: -len('.pth')]
        assert f'--work-dir work_dirs/{work_dir}' in backbone.init_cfg.made_by
        classifier = load(osp.join(REPO, cls_recipe)).model.backbone
        # the start is the function the classifier trained: its every argument, but outputs, regularisers and start
        for key in (set(classifier) | set(backbone)) - NOT_THE_FUNCTION - {'arch'}:
            assert backbone.get(key) == classifier.get(key), (key, cls_recipe)
    if backbone.type == 'ReViT':  # trained at the depth it is tested at, or the paper's elastic depth
        assert backbone.step_drop_rate == (0.3 if '-elastic_' in path else 0.0)


def test_every_revit_recipe_has_an_elastic_variant_that_changes_only_the_step_dropout():
    fixed = [p for p in REAL if re.search(r'_revit-(s|b)_', osp.basename(p))]  # the paper-faithful ones
    assert len(fixed) == 8
    for path in fixed:
        elastic = osp.join(osp.dirname(path), re.sub(r'_revit-(s|b)_', r'_revit-\1-elastic_', osp.basename(path)))
        assert osp.isfile(elastic), f'{rel(path)} has no elastic variant {rel(elastic)}'
        a, b = load(path).to_dict(), load(elastic).to_dict()
        assert b['model']['backbone'].pop('step_drop_rate') == 0.3
        a['model']['backbone'].pop('step_drop_rate')
        a.pop('recipe'), b.pop('recipe')  # the elastic one declares its step dropout (compare.py)
        assert a == b


def test_the_toys_train_from_scratch_with_their_methods_choices():
    for path in TOY:
        backbone = load(path).model.backbone
        want = TOY_ARGS.get(backbone.type, {})
        assert {k: backbone.get(k) for k in want} == want, rel(path)
        assert backbone.get('step_drop_rate', 0.0) == 0.0 and backbone.init_cfg is None


# ---- the recipes --------------------------------------------------------------------------------------
def test_every_real_config_stands_on_a_known_recipe():
    unknown = sorted({osp.basename(recipe_of(p)) for p in REAL} - set(RECIPES))
    assert not unknown, f'recipes without an entry in RECIPES: {unknown}'


@pytest.mark.parametrize('path', REAL, ids=[rel(p) for p in REAL])
def test_the_recipe_is_what_its_header_says(path):
    want = RECIPES[osp.basename(recipe_of(path))]
    cfg = load(path)
    backbone = cfg.model.backbone
    assert backbone.get('window_size', 0) == want['window_size']
    assert 'global_steps' not in backbone  # global attention at the stage ends: the backbones' default
    assert backbone.get('with_cp', False) == want['with_cp']
    assert backbone.drop_path_rate == want['drop_path_rate']
    assert backbone.arch == want['arch']
    optim = cfg.optim_wrapper
    assert optim.type == want['optim_wrapper'] and optim.optimizer.type == 'AdamW'
    assert (optim.optimizer.lr, optim.optimizer.weight_decay) == (want['lr'], want['weight_decay'])
    if want['layer_decay_rate'] is None:
        assert 'constructor' not in optim
    else:
        assert optim.constructor == 'LayerDecayOptimWrapperConstructor'
        assert optim.paramwise_cfg.layer_decay_rate == want['layer_decay_rate']
    gpus, per_gpu = want['batch']
    assert cfg.train_dataloader.batch_size == per_gpu
    if cfg.default_scope == 'mmdet':
        assert cfg.auto_scale_lr.base_batch_size == gpus * per_gpu
        repeat = cfg.train_dataloader.dataset.get('times', 1)  # mmdet's RepeatDataset epochs
        assert cfg.train_cfg.max_epochs * repeat == want['epochs']
    else:
        assert cfg.train_cfg.max_iters == want['iters']
        slide = dict(mode='slide', crop_size=(512, 512), stride=(341, 341))
        assert (cfg.model.test_cfg == slide) == want.get('slide', False)


def test_the_vitdet_recipe_has_layernorm_heads_and_tests_as_it_trains():
    cfg = load(f'{REPO}/configs/det/_base_/mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py')
    ln = dict(type='LN2d', requires_grad=True)
    assert cfg.model.neck[1].norm_cfg == ln
    assert cfg.model.roi_head.bbox_head.type == 'Shared4Conv1FCBBoxHead' and cfg.model.roi_head.bbox_head.norm_cfg == ln
    assert cfg.model.roi_head.mask_head.norm_cfg == ln and cfg.model.rpn_head.num_convs == 2
    assert cfg.optim_wrapper.paramwise_cfg.norm_decay_mult == 0.0 and 'clip_grad' not in cfg.optim_wrapper
    assert cfg.model.data_preprocessor.batch_augments == [
        dict(type='BatchFixedSizePad', size=(1024, 1024), pad_mask=True)
    ]
    for pipeline in (cfg.test_dataloader.dataset.pipeline, cfg.val_dataloader.dataset.pipeline):
        assert [t.type for t in pipeline][1:3] == ['Resize', 'Pad'] and pipeline[2].size == (1024, 1024)
    assert cfg.train_dataloader.dataset.dataset.pipeline[2].type == 'RandomResize'  # lsj-100e's jitter


def test_the_cascade_stages_are_mmdets_with_vitdet_box_heads():
    ours = load(f'{REPO}/configs/det/_base_/cascade-mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py').model
    import mmdet

    mmdet = Config.fromfile(
        osp.join(osp.dirname(mmdet.__file__), '.mim/configs/_base_/models/cascade-mask-rcnn_r50_fpn.py')
    ).model
    assert ours.type == mmdet.type == 'CascadeRCNN'
    vitdet_box_head = dict(
        type='Shared4Conv1FCBBoxHead', conv_out_channels=256, norm_cfg=dict(type='LN2d', requires_grad=True)
    )
    for key in mmdet.roi_head:
        if key == 'bbox_head':
            assert [{**h, **vitdet_box_head} for h in mmdet.roi_head.bbox_head] == ours.roi_head.bbox_head
        elif key == 'mask_head':
            assert {**mmdet.roi_head.mask_head, 'norm_cfg': vitdet_box_head['norm_cfg']} == ours.roi_head.mask_head
        else:
            assert ours.roi_head[key] == mmdet.roi_head[key], key
    assert ours.train_cfg.rcnn == mmdet.train_cfg.rcnn
    assert ours.test_cfg == mmdet.test_cfg


@pytest.mark.parametrize('path', DENSE, ids=[rel(p) for p in DENSE])
def test_neck_and_head_widths_follow_the_backbone_width(path):
    cfg = load(path)
    pyramid = cfg.model.neck[0] if cfg.default_scope == 'mmdet' else cfg.model.neck
    assert pyramid.in_channels == embed_dim_of(cfg.model.backbone)
    widths = SimplePyramid(**{k: v for k, v in pyramid.items() if k != 'type'}).out_channels_per_level
    if cfg.default_scope == 'mmdet':
        assert cfg.model.neck[1].in_channels == widths
    else:
        assert cfg.model.decode_head.in_channels == widths
        assert cfg.model.auxiliary_head.in_channels == widths[cfg.model.auxiliary_head.in_index]


RECIPE_BASES = sorted(
    f'{REPO}/configs/{task}/_base_/{name}'
    for name in RECIPES
    for task in ('det', 'seg')
    if osp.isfile(f'{REPO}/configs/{task}/_base_/{name}')
)


@pytest.mark.slow
@pytest.mark.parametrize('path', RECIPE_BASES, ids=[rel(p) for p in RECIPE_BASES])
def test_the_whole_model_of_each_recipe_builds(path):
    cfg = load(path)
    cfg.model.backbone.init_cfg = None
    scope = cfg.default_scope
    registry = __import__(f'{scope}.registry', fromlist=['MODELS']).MODELS

    with DefaultScope.overwrite_default_scope(scope):
        model = registry.build(cfg.model)
    assert model.backbone.embed_dim == embed_dim_of(cfg.model.backbone)


@pytest.mark.parametrize(
    'name',
    [
        'mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py',
        'cascade-mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py',
    ],
)
@pytest.mark.slow
def test_the_vitdet_detectors_train_a_step_with_layernorm_heads_windows_and_checkpointing(name):
    """One loss + backward at 128x128 (the data preprocessor's 1024x1024 padding is a training-batch augment:
    called with training=False here): LN2d in FPN/heads, window attention, with_cp, the cascade."""
    from mmdet.registry import MODELS
    from mmdet.testing import demo_mm_inputs

    cfg = load(f'{REPO}/configs/det/_base_/{name}')
    cfg.model.backbone.update(init_cfg=None, arch='tiny')
    cfg.model.neck[0].in_channels = 192
    cfg.model.neck[1].in_channels = [48, 96, 192, 192]
    with DefaultScope.overwrite_default_scope('mmdet'):
        model = MODELS.build(cfg.model).train()
        data = model.data_preprocessor(
            demo_mm_inputs(1, [(3, 128, 128)], num_items=[3], with_mask=True), training=False
        )
        loss, _ = model.parse_losses(model.loss(data['inputs'], data['data_samples']))
    loss.backward()
    assert torch.isfinite(loss)
    for part in (model.neck, model.roi_head):
        assert any(isinstance(m, LN2d) for m in part.modules())
    assert model.backbone.with_cp and model.backbone.window_size == 14
    assert model.backbone.patch_embed.proj.weight.grad is not None


# ---- seeding and TF32 ----------------------------------------------------------------------------------
@pytest.mark.parametrize('path', CONFIGS, ids=[rel(p) for p in CONFIGS])
def test_real_recipes_seed_each_rank_its_own_noise_and_toys_alike_and_all_allow_tf32(path):
    cfg = load(path)
    assert cfg.randomness == dict(seed=0, diff_rank_seed='_toy-' not in path)
    assert {'RecursionHook', 'RNGStateHook', 'TF32Hook'} <= {h['type'] for h in cfg.custom_hooks}


def test_tf32_hook_sets_both_flags_before_the_run():
    from mmrecvit.mm.hooks import TF32Hook

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        TF32Hook().before_run(None)
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        TF32Hook(allow=False).before_run(None)
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        with pytest.raises(TypeError, match='TF32Hook allow'):
            TF32Hook(allow=1)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# ---- LN2d ----------------------------------------------------------------------------------------------
# 'mmengine': the root registry (None would keep whichever scope an earlier test left current). Under
# mmpretrain's scope `LN2d` is mmpretrain's own LayerNorm2d, which its registry finds first.
@pytest.mark.parametrize('scope', ['mmengine', 'mmdet', 'mmseg'])
def test_ln2d_is_a_norm_cfg_type_in_every_scope_and_normalises_channels(scope):
    from mmcv.cnn import ConvModule, build_norm_layer

    with DefaultScope.overwrite_default_scope(scope):
        name, norm = build_norm_layer(dict(type='LN2d', requires_grad=True), 8)
        conv = ConvModule(4, 8, 3, padding=1, norm_cfg=dict(type='LN2d'))
    assert name == 'ln' and isinstance(norm, LN2d) and conv.conv.bias is None and conv.norm_name == 'ln'
    with torch.no_grad():
        norm.weight.uniform_(), norm.bias.uniform_()
    x = torch.randn(2, 8, 5, 7).to(memory_format=torch.channels_last)
    y = norm(x)
    assert y.is_contiguous()  # NCHW memory, as mmcv's RoIAlign reads it
    expected = torch.nn.functional.layer_norm(x.permute(0, 2, 3, 1), (8,), norm.weight, norm.bias, norm.eps)
    torch.testing.assert_close(y, expected.permute(0, 3, 1, 2))


# ---- test-time augmentation -----------------------------------------------------------------------------
@pytest.mark.parametrize('path', [p for p in CONFIGS if '/det/' in p], ids=[rel(p) for p in CONFIGS if '/det/' in p])
def test_det_tta_pipelines_flip_before_padding_and_keep_the_flip(path):
    cfg = load(path)
    assert cfg.tta_model.type == 'MaskDetTTAModel' and 'mmrecvit.mm.tta' in cfg.custom_imports.imports
    steps = [[t.type for t in options] for options in cfg.tta_pipeline[1].transforms]
    flat = [options[0] for options in steps]
    assert steps[flat.index('RandomFlip')] == ['RandomFlip', 'RandomFlip']
    assert 'Pad' not in flat or flat.index('Pad') > flat.index('RandomFlip')
    from mmdet.registry import TRANSFORMS

    # in mmdet's scope whatever scope an earlier test in this worker left current (else mmseg's, say, is searched)
    with DefaultScope.overwrite_default_scope('mmdet'):
        pack = TRANSFORMS.build(cfg.tta_pipeline[1].transforms[-1][0])  # its meta keys, as given or mmdet's default
    assert {'flip', 'flip_direction'} <= set(pack.meta_keys)
    test_pipeline = cfg.test_dataloader.dataset.pipeline
    assert cfg.tta_pipeline[1].transforms[0][0] == test_pipeline[1]  # the test scale


def test_mask_tta_model_keeps_each_boxs_own_mask_with_the_flip_undone():
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData

    from mmrecvit.mm.tta import MaskDetTTAModel

    class Dummy(torch.nn.Module):
        def test_step(self, data):
            return data

    H, W = 20, 40

    def view(flip, boxes, scores, labels):
        sample = DetDataSample(metainfo=dict(ori_shape=(H, W), flip=flip, flip_direction='horizontal'))
        masks = torch.zeros(len(boxes), H, W, dtype=torch.bool)
        for i, (x1, y1, x2, y2) in enumerate(boxes):
            masks[i, y1:y2, x1:x2] = True
        sample.pred_instances = InstanceData(
            bboxes=torch.tensor(boxes, dtype=torch.float32),
            scores=torch.tensor(scores),
            labels=torch.tensor(labels),
            masks=masks,
        )
        return sample

    # object A in both views (the plain one scores higher); object B only in the flipped one
    plain = view(False, [(2, 2, 10, 8)], [0.9], [0])
    flipped = view(True, [(W - 10, 2, W - 2, 8), (W - 35, 10, W - 25, 18)], [0.8, 0.7], [0, 1])
    tta = MaskDetTTAModel(module=Dummy(), tta_cfg=ConfigDict(nms=dict(type='nms', iou_threshold=0.5), max_per_img=100))
    merged = tta.merge_preds([[plain, flipped]])[0].pred_instances
    torch.testing.assert_close(merged.bboxes, torch.tensor([[2.0, 2, 10, 8], [25, 10, 35, 18]]))
    torch.testing.assert_close(merged.scores, torch.tensor([0.9, 0.7]))
    assert merged.labels.tolist() == [0, 1]
    for box, mask in zip(merged.bboxes.long().tolist(), merged.masks):
        x1, y1, x2, y2 = box
        expected = torch.zeros(H, W, dtype=torch.bool)
        expected[y1:y2, x1:x2] = True
        assert torch.equal(mask, expected)


# ---- data checks (issue 19) ---------------------------------------------------------------------------------
def _datasets(dataset):
    """A dataset config and the ones it wraps (RepeatDataset, ConcatDataset, ...)."""
    yield dataset
    for inner in ([dataset['dataset']] if 'dataset' in dataset else []) + list(dataset.get('datasets', [])):
        yield from _datasets(inner)


@pytest.mark.parametrize('path', DENSE, ids=[rel(p) for p in DENSE])
def test_every_dense_recipe_checks_its_data(path):
    """COCO sets are CheckedCocoDataset (bad boxes, masks, categories, images: mm/coco.py) and ADE20K pipelines
    check each map right after loading it (CheckSegMap: labels, size: mm/data.py), in training and in testing."""
    cfg = load(path)
    for split in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        datasets = list(_datasets(cfg[split]['dataset']))
        if '/det/' in path:
            leaves = [d for d in datasets if 'ann_file' in d]
            assert leaves and all(d['type'] == 'CheckedCocoDataset' for d in leaves), (split, leaves)
        else:
            pipelines = [d['pipeline'] for d in datasets if 'pipeline' in d]
            assert pipelines, split
            for pipeline in pipelines:
                types = [t['type'] for t in pipeline]
                assert types[types.index('LoadAnnotations') + 1] == 'CheckSegMap', (split, types)


def test_every_shipped_config_saves_rng_states():
    """The recipe bases list the hook, and a config that adds hooks keeps theirs (Edge-RecViT's temperature)."""
    bases = [
        f'{REPO}/configs/det/_base_/models/mask-rcnn_vit_fpn.py',
        f'{REPO}/configs/seg/_base_/upernet_vit_8xb2-160k_ade20k-512x512.py',
        f'{REPO}/configs/cls/_base_/recvit-small_4xb256_in1k.py',
        f'{REPO}/configs/distill/_base_/feature-distill_4xb256-100e_in1k.py',
    ]
    for path in bases:
        assert {'RecursionHook', 'RNGStateHook'} <= {h['type'] for h in load(path).custom_hooks}
    others = [p for p in glob.glob(f'{REPO}/configs/**/*.py', recursive=True) if p not in bases]
    setting = [p for p in others if re.search(r'^custom_hooks =', open(p).read(), re.M)]
    keeping = [p for p in setting if re.search(r'^custom_hooks = \[\*_base_\.custom_hooks, ', open(p).read(), re.M)]
    assert others and sorted(setting) == sorted(keeping), "a config that adds hooks keeps its base's"


@pytest.mark.slow
def test_every_shipped_backbone_config_puts_every_parameter_in_the_graph():
    """What DDP with `find_unused_parameters=False` needs, for the backbone settings of every config
    (depths, recursions, out_indices, windows, checkpointing: a config whose outputs stop before the last
    step would leave blocks unused and fail on the second DDP iteration). The width is the only thing
    changed (32, 2 heads): which parameters a forward reaches does not depend on it."""
    seen = set()
    for path in CONFIGS:
        backbone = {k: v for k, v in load(path).model.backbone.items() if k not in ('_delete_', 'init_cfg')}
        key = repr(sorted(backbone.items()))
        if key in seen:
            continue
        seen.add(key)
        torch.manual_seed(0)
        model = BACKBONES[backbone.pop('type')](**{**backbone, 'embed_dim': 32, 'num_heads': 2}).train()
        outs = model(torch.randn(2, 3, 64, 64))
        (sum(o.mean() for o in outs) + sum(outs.stats.aux_losses.values(), torch.zeros(()))).backward()
        unused = [n for n, p in model.named_parameters() if p.grad is None]
        assert not unused, f'{osp.relpath(path, REPO)}: parameters outside the graph {unused}'
