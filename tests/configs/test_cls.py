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
FINETUNE = [p for p in CONFIGS if '-small_deit-pre_' in p]
BASE = [p for p in CONFIGS if '-base_' in p]  # the ViT-B starts of the B dense recipes
ABLATIONS = {  # each paper's own ablation (issue 45.3): the method's recipe, the ablation's arguments changed
    'srvit-small_final-readout_4xb256_in1k.py': ('srvit-small_4xb256_in1k.py', dict(readout='final')),
    'revit-small_one-expert_4xb256_in1k.py': ('revit-small_4xb256_in1k.py', dict(num_experts=1)),
    'morvit-small_full-capacity_4xb256_in1k.py': ('morvit-small_4xb256_in1k.py', dict(capacities=[1.0] * 10)),
    'edgerecvit-small_deit-pre-full-depth_8xb256-300e_in1k.py': (
        'edgerecvit-small_deit-pre_8xb256-300e_in1k.py',
        dict(depth_shift=11, stb_loss_weight=0.0, du_loss_weight=0.0),
    ),
}
METHODS = ['edgerecvit', 'morvit', 'naiverecvit', 'plainvit', 'revit', 'srvit']
DEIT = 'checkpoints/deit_small_patch16_224-cd65a155.pth'

pytestmark = pytest.mark.usefixtures('one_thread')


def method_of(path):
    return osp.basename(path).split('-')[0]  # srvit-small_4xb256_in1k.py -> srvit


def pipeline_types(cfg):
    return [t['type'] for t in cfg.train_dataloader.dataset.pipeline]


def test_every_config_is_one_of_the_recipes_of_a_method():
    ablations = [osp.join(REPO, 'configs/cls', name) for name in ABLATIONS]
    assert sorted(CONFIGS) == sorted(TOY + SCRATCH + FINETUNE + BASE + ablations)
    for group in (TOY, SCRATCH, FINETUNE):
        assert sorted(map(method_of, group)) == METHODS
    assert sorted(map(method_of, BASE)) == [m for m in METHODS if m != 'plainvit']  # PlainViT-B: DeiT-B's release


@pytest.mark.parametrize('path', BASE, ids=[osp.basename(p) for p in BASE])
def test_a_base_start_is_its_small_recipe_at_vit_b_width(path):
    (small,) = [p for p in SCRATCH + FINETUNE if osp.basename(p) == osp.basename(path).replace('-base_', '-small_')]
    a, b = cached_config(small).to_dict(), cached_config(path).to_dict()
    assert b['model']['backbone'].pop('arch') == 'base' and a['model']['backbone'].pop('arch') == 'small'
    assert b['model']['head'].pop('in_channels') == 768 and a['model']['head'].pop('in_channels') == 384
    if method_of(path) == 'edgerecvit':  # its paper fine-tunes DeiT at each width
        assert b['model']['backbone'].pop('init_cfg')['checkpoint'].endswith('deit_base_patch16_224-b5f2ef4d.pth')
        a['model']['backbone'].pop('init_cfg')
    for cfg in (a, b):
        cfg.pop('recipe'), cfg.pop('embed_dim'), cfg.pop('deit_checkpoint', None)
    assert a == b


@pytest.mark.parametrize('name', sorted(ABLATIONS))
def test_an_ablation_is_its_methods_recipe_with_the_ablations_arguments(name):
    """Issue 45.3: each paper's own baseline, trained as the method is (Edge-RecViT's: a plain classifier, no CCE)."""
    recipe, args = ABLATIONS[name]
    a, b = (cached_config(osp.join(REPO, 'configs/cls', n)).to_dict() for n in (recipe, name))
    assert {k: b['model']['backbone'].pop(k) for k in args} == args
    if name.startswith('edgerecvit'):
        assert (a['model'].pop('type'), b['model'].pop('type')) == ('ConfidenceScaledClassifier', 'ImageClassifier')
    for cfg in (a, b):
        cfg.pop('recipe')
        [cfg['model']['backbone'].pop(k, None) for k in args]
    assert a == b


@pytest.mark.parametrize('path', CONFIGS, ids=[osp.relpath(p, REPO) for p in CONFIGS])
def test_config_loads_and_the_classifier_builds(path):
    from mmpretrain.registry import MODELS

    cfg = cached_config(path)
    assert cfg.default_scope == 'mmpretrain'
    assert 'mmrecvit.mm' in cfg.custom_imports['imports']  # registration lives in mmrecvit.mm (issue 47.1)
    assert {'RecursionHook', 'RNGStateHook'} <= {h['type'] for h in cfg.custom_hooks}
    # Edge-RecViT's: its CCE loss (mmrecvit/mm/cce.py), an ImageClassifier with the logits scaled by its confidence
    cce = '/edgerecvit-' in path and '-full-depth_' not in path  # its ablation: no ranker decision to scale by
    assert cfg.model.type == ('ConfidenceScaledClassifier' if cce else 'ImageClassifier')
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
    epochs = 20 if method_of(path) == 'srvit' else 5  # SR-ViT's paper: a longer warm-up for larger T (T=4 here)
    assert warmup.type == 'LinearLR' and warmup.end == epochs and cosine.type == 'CosineAnnealingLR'
    assert cosine.begin == epochs
    assert cfg.model.head.loss == dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original')
    assert {'RandAugment', 'RandomErasing', 'RandomResizedCrop'} <= set(pipeline_types(cfg))
    assert cfg.train_dataloader.sampler.type == 'RepeatAugSampler'
    # reViT's step dropout (0.3) is its paper's stochastic depth: no drop path on top (issue 45)
    assert cfg.model.backbone.drop_path_rate == (0.0 if method_of(path) == 'revit' else 0.1)
    mixing = [a['type'] for a in (cfg.model.train_cfg or {}).get('augments', [])]
    # Edge-RecViT's paper excludes label mixing; every other method keeps DeiT's Mixup 0.8 / CutMix 1.0
    assert mixing == ([] if method_of(path) == 'edgerecvit' else ['Mixup', 'CutMix'])


@pytest.mark.parametrize('path', FINETUNE, ids=[osp.basename(p) for p in FINETUNE])
def test_finetune_recipes_start_from_deit_where_each_method_represents_it(path):
    cfg = cached_config(path)
    backbone = cfg.model.backbone
    assert backbone.init_cfg == dict(type='Pretrained', checkpoint=DEIT, purpose='pretraining')  # no start warning
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
        'srvit': ('router_init', 'function'),
        'revit': ('router_init', 'programmed'),
        'morvit': ('router_init', 'open'),
        'naiverecvit': ('shared_init', 'cycle'),
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
        depth=2,
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
