"""timm's optimizer factory with layer decay on our models (mmrecvit/timm/optim.py, `group_matcher`): the groups
are our recursion-aware layer depths, `param_groups_layer_decay` gives each parameter the lr scale of the mm and
detectron2 paths, and timm's own ranked scales equal it where the depths are consecutive integers."""

from functools import partial

import pytest
from backbone_cases import BACKBONE_CASES

from mmrecvit.models.layer_decay import lr_scale
from mmrecvit.timm import METHODS, param_groups_layer_decay

pytestmark = pytest.mark.usefixtures('one_thread')
SHORT = {cls: short for short, cls in METHODS.items()}
RATE = 0.75


def create(method, **kwargs):
    import timm

    case = {k: v for k, v in BACKBONE_CASES[method].items() if k != 'arch'}
    return timm.create_model(f'{SHORT[method]}_tiny_patch16_224', num_classes=5, **{**case, **kwargs})


def our_scale(model, name):
    """The rule of models/layer_decay.py, asked from the backbone (1 outside it)."""
    if not name.startswith('backbone.'):
        return 1.0
    bb = model.backbone
    return lr_scale(RATE, bb.layer_depth(name[len('backbone.') :]), bb.num_layers)


def scales(optimizer, model):
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[id(p)]: g['lr_scale'] for g in optimizer.param_groups for p in g['params']}


@pytest.mark.parametrize('method', list(BACKBONE_CASES))
def test_param_groups_layer_decay_gives_our_lr_scales(method):
    from timm.optim import create_optimizer_v2

    model = create(method)
    fn = partial(param_groups_layer_decay, layer_decay=RATE, weight_decay=0.05)
    optimizer = create_optimizer_v2(model, 'adamw', lr=1e-3, weight_decay=0.05, param_group_fn=fn)
    got = scales(optimizer, model)
    assert got.keys() == dict(model.named_parameters()).keys()
    for name, scale in got.items():
        assert scale == pytest.approx(our_scale(model, name)), name
    decayed = {n for g in optimizer.param_groups if g['weight_decay'] > 0 for n in scales_of(g, model)}
    assert 'backbone.pos_embed' not in decayed and 'backbone.cls_token' not in decayed  # no_weight_decay()
    assert any(n.endswith('attn.qkv.weight') for n in decayed)


def scales_of(group, model):
    names = {id(p): n for n, p in model.named_parameters()}
    return [names[id(p)] for p in group['params']]


@pytest.mark.parametrize('method', list(BACKBONE_CASES))
def test_timms_own_layer_decay_groups_by_our_depths_in_our_order(method):
    """create_optimizer_v2(layer_decay=...) (train.py's --layer-decay) ranks `group_matcher`'s depths: the same
    groups and order as ours; the same scales exactly when the depths are 0..L+1 without gaps."""
    from timm.optim import create_optimizer_v2

    model = create(method)
    timm_scales = scales(create_optimizer_v2(model, 'adamw', lr=1e-3, layer_decay=RATE), model)
    ours = {n: our_scale(model, n) for n in timm_scales}
    for a in ours:  # one partition, one order
        for b in ours:
            assert (ours[a] < ours[b]) == (timm_scales[a] < timm_scales[b]), (a, b)
    matcher = model.group_matcher()
    depths = sorted({matcher(n) for n in timm_scales})
    if depths == list(range(len(depths))):
        assert timm_scales == pytest.approx(ours)


def test_plainvit_gets_our_scales_from_timms_own_layer_decay():
    from timm.optim import create_optimizer_v2

    model = create('PlainViT')
    got = scales(create_optimizer_v2(model, 'adamw', lr=1e-3, layer_decay=RATE), model)
    assert got == pytest.approx({n: our_scale(model, n) for n in got})
    assert got['backbone.patch_embed.proj.weight'] == pytest.approx(RATE ** (BACKBONE_CASES['PlainViT']['depth'] + 1))


def test_a_group_matcher_that_mixes_depths_is_refused():
    model = create('NaiveRecursiveViT')
    model.group_matcher = lambda coarse=False: dict(all=r'.*')
    with pytest.raises(ValueError, match='puts parameters of different layer depths in one group'):
        param_groups_layer_decay(model, layer_decay=RATE)


@pytest.mark.parametrize('method', ['ReViT', 'NaiveRecursiveViT'])
def test_the_matched_policy_reaches_timm_and_detectron2_alike(method):
    """Issue 45.4: layer_decay_policy='matched' gives timm's groups and detectron2's lr factors the mm constructor's
    scales (`adapters.layer_lr_scales`): one rate means the same in every framework."""
    from timm.optim import create_optimizer_v2

    from mmrecvit.adapters import layer_lr_scales

    model = create(method)
    fn = partial(param_groups_layer_decay, layer_decay=RATE, layer_decay_policy='matched')
    got = scales(create_optimizer_v2(model, 'adamw', lr=1e-3, param_group_fn=fn), model)
    matched = layer_lr_scales(model, RATE, 'matched')
    assert all(got[n] == pytest.approx(matched.get(n, 1.0)) for n in got)
    assert any(got[n] != pytest.approx(our_scale(model, n)) for n in got)  # not the per-layer scales
    pytest.importorskip('detectron2')
    from mmrecvit.d2 import layer_decay_lr_factor

    factor = layer_decay_lr_factor(model, RATE, 'matched')
    assert all(factor(n) == pytest.approx(matched.get(n, 1.0)) for n in got)
