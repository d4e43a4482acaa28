"""Layer-wise lr decay that understands recursion: the backbones' layer depths and the constructor (issue 8).

The expected depths are written out here from the documented rule (`ViTBackbone.layer_depth`):
embeddings 0; a module run at layer positions p_1..p_k gets their mean; everything else (routers,
rankers, step transforms, final norms) `num_layers + 1` (`num_layers` = L, detectron2's). Each parameter group's lr
must then be base_lr * [custom lr_mult] * rate ** (num_layers + 1 - depth), and the neck's base_lr. Below, the
layer scale's length num_layers + 1 is written out.
"""

import math

import pytest
import torch
from backbone_cases import BACKBONE_CASES
from helpers import REPO
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from torch import nn

import mmrecvit.mm  # noqa: F401  (registration)
from mmrecvit.mm.optim import LayerDecayOptimWrapperConstructor
from mmrecvit.models import BACKBONES

BASE_LR, BASE_WD, RATE = 1e-3, 0.05, 0.5
CUSTOM_KEYS = {'pos_embed': dict(decay_mult=0.0), 'cls_token': dict(decay_mult=0.0), 'norm': dict(decay_mult=0.0)}
EMBEDDINGS = ('patch_embed.', 'pos_embed', 'cls_token')


def expected_plainvit(name: str) -> float:  # PlainViT depth=4: block i at position i+1
    return float(int(name.split('.')[1]) + 1)


def expected_naive(name: str) -> float:  # 6 steps, 2 unique blocks: block 0 at 1, 3, 5; block 1 at 2, 4, 6
    return {0: 3.0, 1: 4.0}[int(name.split('.')[1])]


def expected_srvit(name: str) -> float | None:  # depth 6, T=[2,3,2,1]: block b stays at b+1 for every T
    return float(int(name.split('.')[1]) + 1) if name.startswith('blocks.') else None


def expected_revit(name: str) -> float | None:  # one block at positions 1..4
    return 2.5 if name.startswith('block.') else None


def expected_edge(name: str) -> float | None:  # L=5: head 1, shared at 2, 3, 4, tail 5
    return {0: 1.0, 1: 3.0, 2: 5.0}[int(name.split('.')[1])] if name.startswith('blocks.') else None


def expected_from_schedule(model: nn.Module):
    """A model with a `schedule` of unique-block indices (MoR-ViT): the default rule, re-derived."""
    steps = {}
    for s, b in enumerate(model.schedule):
        steps.setdefault(b, []).append(s + 1)

    def depth(name: str) -> float | None:
        if not name.startswith('blocks.'):
            return None
        used = steps[int(name.split('.')[1])]
        return sum(used) / len(used)

    return depth


EXPECTED = {  # name -> (num_layers + 1, depth rule (None: above all blocks))
    'PlainViT': (5, expected_plainvit),
    'NaiveRecursiveViT': (7, expected_naive),
    'SRViT': (7, expected_srvit),
    'ReViT': (5, expected_revit),
    'EdgeRecViT': (6, expected_edge),
}


class Detector(nn.Module):
    """backbone + neck, as an mmdet/mmseg model holds them."""

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.neck = nn.Sequential(nn.Linear(backbone.embed_dim, 8), nn.LayerNorm(8))


def expected_depth(name: str, model: nn.Module) -> tuple[int, float]:
    cls = type(model).__name__
    if cls in EXPECTED:
        num_layers, rule = EXPECTED[cls]
    else:  # a backbone added later: it must keep a schedule of unique blocks or be listed above
        assert hasattr(model, 'schedule'), f'add the expected layer depths of {cls} to EXPECTED'
        num_layers, rule = 1 + len(model.schedule), expected_from_schedule(model)
    if name.startswith(EMBEDDINGS):
        return num_layers, 0.0
    depth = rule(name)
    return num_layers, float(num_layers) if depth is None else depth


def build_groups(model: nn.Module, paramwise_cfg: dict) -> list[dict]:
    constructor = LayerDecayOptimWrapperConstructor(
        dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=BASE_LR, weight_decay=BASE_WD)), paramwise_cfg
    )
    return constructor(model).optimizer.param_groups


@pytest.mark.parametrize('name', sorted(BACKBONE_CASES))
def test_every_backbone_reports_the_documented_layer_depths(name):
    model = BACKBONES[name](**BACKBONE_CASES[name])
    params = dict(model.named_parameters())
    num_layers = expected_depth(next(iter(params)), model)[0]
    assert model.num_layers + 1 == num_layers  # the layer scale: L layers (detectron2's num_layers) + 1
    for pname in params:
        assert model.layer_depth(pname) == pytest.approx(expected_depth(pname, model)[1]), pname


@pytest.mark.parametrize('name', sorted(BACKBONE_CASES))
def test_every_parameter_group_gets_its_lr_scale_and_weight_decay(name):
    model = Detector(BACKBONES[name](**BACKBONE_CASES[name]))
    groups = build_groups(model, dict(layer_decay_rate=RATE, custom_keys=CUSTOM_KEYS))
    names = {id(p): n for n, p in model.named_parameters()}
    seen = set()
    for group in groups:
        (param,) = group['params']
        full = names[id(param)]
        seen.add(full)
        if full.startswith('backbone.'):
            num_layers, depth = expected_depth(full[len('backbone.') :], model.backbone)
            scale = RATE ** (num_layers - depth)
        else:
            scale = 1.0
        assert group['lr'] == pytest.approx(BASE_LR * scale), full
        assert group['lr_scale'] == pytest.approx(scale), full
        no_decay = any(k in full for k in CUSTOM_KEYS)
        assert group['weight_decay'] == pytest.approx(0.0 if no_decay else BASE_WD), full
    assert seen == set(names.values())  # every parameter in exactly one group


def test_shared_block_gets_the_geometric_mean_of_its_applications_scales():
    model = BACKBONES['ReViT'](**BACKBONE_CASES['ReViT'])  # one block at positions 1..4, num_layers 5
    groups = build_groups(Detector(model), dict(layer_decay_rate=RATE))
    qkv = model.block.attn.qkv.weight
    (group,) = [g for g in groups if g['params'][0] is qkv]
    per_application = [RATE ** (5 - p) for p in range(1, 5)]
    assert group['lr_scale'] == pytest.approx(math.prod(per_application) ** (1 / 4))
    # The elastic depth changes the layer scale with L.
    model.depth = 8
    assert model.num_layers + 1 == 9 and model.layer_depth('block.attn.qkv.weight') == 4.5  # L = 8 layers


def test_custom_lr_mult_multiplies_with_the_layer_scale():
    model = Detector(BACKBONES['PlainViT'](**BACKBONE_CASES['PlainViT']))
    groups = build_groups(model, dict(layer_decay_rate=RATE, custom_keys={'backbone.blocks.0.': dict(lr_mult=0.1)}))
    (group,) = [g for g in groups if g['params'][0] is model.backbone.blocks[0].mlp.fc1.weight]
    assert group['lr'] == pytest.approx(BASE_LR * 0.1 * RATE**4)


def test_srvit_layer_scale_does_not_depend_on_the_recursion_steps():
    """T is a test-time knob: the optimizer groups of the shared parameters are those of T=1 (DeiT's)."""
    kwargs = dict(BACKBONE_CASES['SRViT'])
    t1 = BACKBONES['SRViT'](**{**kwargs, 'num_recursions': 1})
    t4 = BACKBONES['SRViT'](**{**kwargs, 'num_recursions': 4})
    plain_kwargs = {('depth' if k == 'num_blocks' else k): v for k, v in kwargs.items() if k != 'num_recursions'}
    plain = BACKBONES['PlainViT'](**plain_kwargs)
    for name, _ in t1.named_parameters():
        assert t1.layer_depth(name) == t4.layer_depth(name) == plain.layer_depth(name), name
    assert t1.num_layers + 1 == t4.num_layers + 1 == plain.num_layers + 1 == 7  # L = 6 layers


@pytest.mark.parametrize('name', sorted(BACKBONE_CASES))
def test_the_matched_policy_gives_every_backbone_a_plain_vits_mean_lr_scale(name):
    """layer_decay_policy='matched' (models/layer_decay.py): the parameter-weighted mean lr scale of a backbone's
    embeddings and blocks is a plain ViT's of its width and depth at the written rate; a plain ViT keeps the rate."""
    model = BACKBONES[name](**BACKBONE_CASES[name])
    kwargs = {k: v for k, v in BACKBONE_CASES[name].items() if k in ('arch', 'img_size', 'embed_dim', 'num_heads')}
    plain = BACKBONES['PlainViT'](**kwargs, depth=model.num_layers)

    def mean_scale(m, policy):
        groups = build_groups(Detector(m), dict(layer_decay_rate=RATE, layer_decay_policy=policy))
        pairs = [(g['lr_scale'], g['params'][0].numel()) for g in groups]
        counted = [(s, n) for s, n in pairs if s < 1.0]  # depth <= L (those at L + 1 keep scale 1)
        return sum(s * n for s, n in counted) / sum(n for _, n in counted)

    target = mean_scale(plain, 'per_layer')
    assert mean_scale(plain, 'matched') == target
    assert mean_scale(model, 'matched') == pytest.approx(target, rel=1e-9)
    if name == 'ReViT':  # its one block at the mean position: 'per_layer' gives it less than the plain ViT's mean
        assert mean_scale(model, 'per_layer') < 0.9 * target


def test_bad_arguments_are_named():
    optim = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=BASE_LR))
    with pytest.raises(ValueError, match='layer_decay_rate'):
        LayerDecayOptimWrapperConstructor(optim, dict())
    with pytest.raises(ValueError, match='layer_decay_rate'):
        LayerDecayOptimWrapperConstructor(optim, dict(layer_decay_rate=1.5))
    with pytest.raises(ValueError, match='layer_decay_policy'):
        LayerDecayOptimWrapperConstructor(optim, dict(layer_decay_rate=0.7, layer_decay_policy='mean'))
    with pytest.raises(KeyError, match='not a parameter'):
        BACKBONES['PlainViT'](**BACKBONE_CASES['PlainViT']).layer_depth('backbone.blocks.0.norm1.weight')


@pytest.mark.parametrize('scope', ['mmdet', 'mmseg'])
def test_registered_for_mmdet_and_mmseg(scope):
    init_default_scope(scope)
    model = Detector(BACKBONES['EdgeRecViT'](**BACKBONE_CASES['EdgeRecViT']))
    wrapper = build_optim_wrapper(
        model,
        dict(
            type='OptimWrapper',
            constructor='LayerDecayOptimWrapperConstructor',
            optimizer=dict(type='AdamW', lr=BASE_LR, weight_decay=BASE_WD),
            paramwise_cfg=dict(layer_decay_rate=RATE, custom_keys=CUSTOM_KEYS),
        ),
    )
    groups = wrapper.optimizer.param_groups
    assert len(groups) == len(list(model.parameters()))
    (ranker,) = [g for g in groups if g['params'][0] is model.backbone.ranker.fc1.weight]
    assert ranker['lr_scale'] == 1.0  # fresh ranker: scale 1
    assert min(g['lr_scale'] for g in groups) == pytest.approx(RATE**6)  # embeddings
    # One optimizer step runs.
    model.backbone(torch.randn(1, 3, 32, 32))[-1].sum().backward()
    wrapper.step()


def test_toy_detector_config_trains_with_the_constructor():
    """The usage shown in configs/det/_base_/mask-rcnn_vit_fpn_1x_coco.py, on the toy Mask R-CNN."""
    from mmengine.config import Config

    from mmrecvit.mm.tooling import build_model

    cfg = Config.fromfile(f'{REPO}/configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py')
    cfg.merge_from_dict(
        {
            'optim_wrapper.constructor': 'LayerDecayOptimWrapperConstructor',
            'optim_wrapper.paramwise_cfg.layer_decay_rate': 0.75,
        }
    )
    model, _ = build_model(cfg)  # selects the mmdet scope
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    base_lr = cfg.optim_wrapper.optimizer.lr
    by_param = {id(g['params'][0]): g for g in wrapper.optimizer.param_groups}
    assert by_param[id(model.backbone.pos_embed)]['lr'] == pytest.approx(base_lr * 0.75**7)  # depth 0 of 7
    assert by_param[id(model.backbone.pos_embed)]['weight_decay'] == 0.0  # custom_keys kept
    assert by_param[id(model.backbone.blocks[5].mlp.fc1.weight)]['lr'] == pytest.approx(base_lr * 0.75)
    assert all(by_param[id(p)]['lr'] == pytest.approx(base_lr) for p in model.roi_head.parameters())
