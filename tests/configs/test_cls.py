"""Every classification config (configs/cls) loads and builds on a machine without ImageNet, the recipes
say what their comments say, and each toy classifier can hand its backbone to the toy detector."""

import glob
import os.path as osp
import sys

import pytest
import torch
from helpers import REPO, cached_config
from mmengine.registry import init_default_scope

from mmrecvit.datasets import TOY_CLS_CLASSES
from mmrecvit.models import BACKBONES

sys.path.insert(0, osp.join(REPO, 'tools'))
import demo as demo_tool  # noqa: E402  (tools/demo.py: which toy det config a method transfers to)

CONFIGS = sorted(glob.glob(f'{REPO}/configs/cls/*.py'))
TOY = [p for p in CONFIGS if p.endswith('_toy-cls.py')]
SCRATCH = [p for p in CONFIGS if p.endswith('-small_4xb256_in1k.py')]
FINETUNE = [p for p in CONFIGS if '_deit-pre_' in p]
METHODS = ['edgerecvit', 'morvit', 'naiverecvit', 'plainvit', 'revit', 'srvit']
DEIT = 'checkpoints/deit_small_patch16_224-cd65a155.pth'

pytestmark = pytest.mark.usefixtures('one_thread')


def method_of(path):
    return osp.basename(path).split('-')[0]  # srvit-small_4xb256_in1k.py -> srvit


def pipeline_types(cfg):
    return [t['type'] for t in cfg.train_dataloader.dataset.pipeline]


def test_every_config_is_one_of_the_three_recipes_of_a_method():
    assert sorted(CONFIGS) == sorted(TOY + SCRATCH + FINETUNE)
    for group in (TOY, SCRATCH, FINETUNE):
        assert sorted(map(method_of, group)) == METHODS


@pytest.mark.parametrize('path', CONFIGS, ids=[osp.relpath(p, REPO) for p in CONFIGS])
def test_config_loads_and_the_classifier_builds(path):
    from mmpretrain.registry import MODELS

    cfg = cached_config(path)
    assert cfg.default_scope == 'mmpretrain'
    assert 'mmrecvit' in cfg.custom_imports['imports']
    assert {'RecursionHook', 'RNGStateHook'} <= {h['type'] for h in cfg.custom_hooks}
    # Edge-RecViT's: its CCE loss (mmrecvit/mm/cce.py), an ImageClassifier with the logits scaled by its confidence
    assert cfg.model.type == ('ConfidenceScaledClassifier' if '/edgerecvit-' in path else 'ImageClassifier')
    assert cfg.model.neck is None
    assert cfg.model.head.type == 'VisionTransformerClsHead'
    assert cfg.model.backbone.out_type == 'cls_token'
    assert cfg.model.init_cfg is None  # the backbones' own init (zero routers) is not overwritten
    toy = path in TOY
    assert cfg.model.head.num_classes == cfg.data_preprocessor.num_classes == (len(TOY_CLS_CLASSES) if toy else 1000)
    init_default_scope('mmpretrain')
    model_cfg = cfg.model.copy()
    model_cfg.backbone.pop('init_cfg', None)  # the fine-tune recipes point at DeiT weights not on this machine
    model = MODELS.build(dict(model_cfg, data_preprocessor=cfg.data_preprocessor))
    assert type(model.backbone) is BACKBONES[cfg.model.backbone.type]
    assert cfg.model.head.in_channels == model.backbone.embed_dim
    if toy:  # a forward at the toy size, through the config's own preprocessor
        batch = dict(inputs=[torch.randint(0, 256, (3, 64, 64), dtype=torch.uint8)] * 2)
        with torch.no_grad():
            logits = model(**model.data_preprocessor(batch, False), mode='tensor')
        assert logits.shape == (2, len(TOY_CLS_CLASSES))


@pytest.mark.parametrize('path', SCRATCH, ids=[osp.basename(p) for p in SCRATCH])
def test_imagenet_recipes_are_deits(path):
    cfg = cached_config(path)
    assert cfg.train_cfg.max_epochs == 300 and cfg.train_dataloader.batch_size == 256
    opt = cfg.optim_wrapper.optimizer
    assert opt.type == 'AdamW' and opt.lr == pytest.approx(5e-4 * 4 * 256 / 512) and opt.weight_decay == 0.05
    assert cfg.auto_scale_lr.base_batch_size == 4 * 256
    warmup, cosine = cfg.param_scheduler
    assert warmup.type == 'LinearLR' and warmup.end == 5 and cosine.type == 'CosineAnnealingLR' and cosine.begin == 5
    assert cfg.model.head.loss == dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original')
    assert {'RandAugment', 'RandomErasing', 'RandomResizedCrop'} <= set(pipeline_types(cfg))
    assert cfg.train_dataloader.sampler.type == 'RepeatAugSampler'
    assert cfg.model.backbone.drop_path_rate == 0.1
    mixing = [a['type'] for a in (cfg.model.train_cfg or {}).get('augments', [])]
    # Edge-RecViT's paper excludes label mixing; every other method keeps DeiT's Mixup 0.8 / CutMix 1.0
    assert mixing == ([] if method_of(path) == 'edgerecvit' else ['Mixup', 'CutMix'])


@pytest.mark.parametrize('path', FINETUNE, ids=[osp.basename(p) for p in FINETUNE])
def test_finetune_recipes_start_from_deit_where_each_method_represents_it(path):
    cfg = cached_config(path)
    backbone = cfg.model.backbone
    assert backbone.init_cfg == dict(type='Pretrained', checkpoint=DEIT)
    method = method_of(path)
    scratch = cached_config(osp.join(REPO, 'configs/cls', f'{method}-small_4xb256_in1k.py'))
    assert {k: v for k, v in scratch.model.backbone.items() if k in backbone} == {
        k: v for k, v in backbone.items() if k in scratch.model.backbone
    }  # the same model ...
    per_image = [c.optim_wrapper.optimizer.lr / c.auto_scale_lr.base_batch_size for c in (cfg, scratch)]
    assert per_image[0] == pytest.approx(per_image[1] / 2)  # ... fine-tuned more gently
    epochs = {'edgerecvit': 300}.get(method, 100)  # Edge-RecViT: the paper's 300 fine-tuning epochs
    assert cfg.train_cfg.max_epochs == epochs and cfg.param_scheduler[-1].end == epochs
    built = BACKBONES[backbone.type](**{k: v for k, v in backbone.items() if k not in ('type', 'init_cfg')})
    start = {
        'srvit': ('timm_init', 'function'),
        'revit': ('timm_gates', 'programmed'),
        'morvit': ('timm_gates', 'open'),
        'naiverecvit': ('timm_init', 'cycle'),
    }.get(method)
    if start is not None:
        assert getattr(built, start[0]) == start[1]
    if method == 'morvit':
        assert built.alpha == 1.0  # the from-scratch alpha 0.1 caps every gate: no DeiT start
    if method == 'edgerecvit':
        assert cfg.model.train_cfg is None and built.shared_init_block == 6


def test_toy_recipe_is_the_toy_set_at_64px():
    for path in TOY:
        cfg = cached_config(path)
        assert tuple(cfg.train_dataloader.dataset.metainfo['classes']) == TOY_CLS_CLASSES
        assert cfg.train_dataloader.dataset.data_root == 'data/toy_cls/'
        assert cfg.train_cfg.type == 'IterBasedTrainLoop' and cfg.model.train_cfg is None  # no Mixup/CutMix
        assert cfg.model.backbone.img_size == 64 and cfg.model.backbone.arch == 'tiny'


@pytest.mark.parametrize('method', METHODS)
def test_toy_classifier_backbone_is_the_toy_detector_backbone(method):
    """What --task transfer needs: the same architecture in both toy configs (output settings aside)."""
    outputs = {'_delete_', 'out_type', 'out_indices', 'img_size', 'init_cfg'}
    cls = cached_config(demo_tool.toy_config('cls', method)).model.backbone
    det = cached_config(demo_tool.toy_config('det', method)).model.backbone
    assert {k: v for k, v in cls.items() if k not in outputs} == {k: v for k, v in det.items() if k not in outputs}


def test_classifier_init_keeps_the_backbones_zero_routers():
    """mmpretrain's DeiT recipe initialises every Linear of the classifier; ours leaves the backbones'."""
    from mmpretrain.registry import MODELS

    cfg = cached_config(osp.join(REPO, 'configs/cls/srvit-ti_1xb32-200it_toy-cls.py'))
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model)
    model.init_weights()
    for name, p in model.backbone.named_parameters():
        if name.startswith(('routers.', 'step_transforms.')):
            assert not p.any(), name
    assert not model.head.layers.head.weight.any()  # VisionTransformerClsHead's own zero init


def test_the_imagenet_recipes_data_path_and_loss_run_on_this_stack(toy_root):
    """DeiT's augmentations (RandomResizedCrop, RandAugment, random erasing), repeated augmentation, Mixup/
    CutMix and the label-smoothed loss through a backward, on toy images: the parts of mmpretrain the real
    recipes use that no toy run reaches, on numpy 2 / torch 2.14 (no fix was needed; mmrecvit/mm/compat.py)."""
    from mmengine.dataset import pseudo_collate
    from mmpretrain.registry import DATA_SAMPLERS, DATASETS, MODELS

    cfg = cached_config(osp.join(REPO, 'configs/cls/srvit-small_4xb256_in1k.py'))
    init_default_scope('mmpretrain')
    dataset = DATASETS.build(
        dict(cfg.train_dataloader.dataset, data_root=str(toy_root / 'toy_cls'), metainfo=dict(classes=TOY_CLS_CLASSES))
    )
    sampler = DATA_SAMPLERS.build(dict(cfg.train_dataloader.sampler, dataset=dataset, seed=0))
    indices = list(sampler)
    assert len(indices) == len(dataset) and len(set(indices)) < len(indices)  # on 1 GPU: a third, each 3 times
    batch = pseudo_collate([dataset[i] for i in indices[:4]])
    assert batch['inputs'][0].shape == (3, 224, 224)
    model_cfg = dict(cfg.model, data_preprocessor=cfg.data_preprocessor)
    model_cfg['backbone'] = dict(
        type='SRViT',
        arch='tiny',
        num_blocks=2,
        unit_sizes=(1, 1),
        num_recursions=2,
        out_type='cls_token',
        drop_path_rate=0.1,
    )  # a small twin of the recipe's model
    model_cfg['head'] = dict(cfg.model.head, in_channels=192)
    model = MODELS.build(model_cfg)
    data = model.data_preprocessor(batch, True)
    assert data['data_samples'][0].gt_score.shape == (1000,)  # Mixup/CutMix: soft targets
    loss = model(**data, mode='loss')['loss']
    assert torch.isfinite(loss)
    loss.backward()
    assert model.backbone.routers['0'].proj.weight.grad is not None
