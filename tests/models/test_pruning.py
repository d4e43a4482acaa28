"""Pruning at build (issue 48.4, `mmrecvit/models/pruning.py`): a backbone whose `out_indices` stop before its last
layer owns only what its training forward reaches (DDP with `find_unused_parameters=False` needs every parameter
in every iteration's graph), computes what the unpruned model computes, and loads the full model's checkpoint."""

import pytest
import torch
from backbone_cases import BACKBONE_CASES

from mmrecvit.models import BACKBONES
from mmrecvit.models.checkpoint import CheckpointError, load_state_dict_into
from mmrecvit.models.pruning import pruned_roots

# (case, backbone, kwargs, the modules pruned): outputs that stop early in every method, with the recipes' noise
# (drop path, reViT's step dropout, Edge-RecViT's depth draw) and their routers.
CASES = [
    ('PlainViT', 'PlainViT', dict(depth=6, out_indices=(3, 1), drop_path_rate=0.1), ['blocks.4', 'blocks.5']),
    ('NaiveRecursiveViT', 'NaiveRecursiveViT', dict(out_indices=(0,)), ['blocks.1']),
    (  # unit 1 (layers 2, 3) ends inside its last recursion: its mixture, the router's one reader, never forms
        'SRViT',
        'SRViT',
        dict(out_indices=(1, 2), drop_path_rate=0.1),
        ['blocks.4', 'blocks.5', 'routers.1', 'routers.2', 'step_transforms.2'],
    ),
    (
        'SRViT-recursion_states',
        'SRViT',
        dict(out_indices=(3,), router_input='recursion_states'),
        ['blocks.4', 'blocks.5', 'routers.2', 'step_transforms.2'],
    ),
    ('ReViT', 'ReViT', dict(depth=6, out_indices=(1, 3), final_norm=True, drop_path_rate=0.1), ['norm']),
    ('EdgeRecViT', 'EdgeRecViT', dict(out_indices=(1, 3), drop_path_rate=0.1), ['blocks.2', 'norm']),
    ('MoRViT', 'MoRViT', dict(out_indices=(1, 2)), ['blocks.2', 'routers.2']),
    ('MoRViT-token_choice', 'MoRViT', dict(out_indices=(0,), routing='token_choice'), ['blocks.1', 'blocks.2']),
]
IDS = [c[0] for c in CASES]


def build(name, **kwargs):
    torch.manual_seed(0)
    return BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs})


def full_and_pruned(name, kwargs):
    """The model built with every layer (then reading `out_indices`, the forward stopping early as before) and the
    one built with `out_indices` (pruned), with the same weights."""
    full = build(name, **{**kwargs, 'out_indices': (-1,)})
    full.out_indices = tuple(i % full.depth for i in kwargs['out_indices'])
    pruned = build(name, **kwargs)
    load_state_dict_into(pruned, full.state_dict(), 'the full model')
    return full, pruned


def train_step(model, x):
    torch.manual_seed(1)
    outs = model.train()(x)
    loss = sum(o.square().mean() for o in outs) + sum(outs.stats.aux_losses.values(), torch.zeros(()))
    loss.backward()
    return list(outs), {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize('case, name, kwargs, roots', CASES, ids=IDS)
def test_the_pruned_model_trains_as_the_full_one_with_every_parameter_in_the_graph(case, name, kwargs, roots):
    full, pruned = full_and_pruned(name, kwargs)
    assert pruned_roots(pruned.pruned_keys) == roots
    x = torch.randn(2, 3, 48, 64)
    (outs_full, grads_full), (outs, grads) = train_step(full, x), train_step(pruned, x)
    assert [n for n, g in grads.items() if g is None] == []  # what DDP's find_unused_parameters=False needs
    assert [n for n, g in grads_full.items() if g is None] != []  # the trap the pruning removes
    assert len(outs) == len(outs_full) and all(torch.equal(a, b) for a, b in zip(outs, outs_full))
    assert all(torch.equal(g, grads_full[n]) for n, g in grads.items())


@pytest.mark.parametrize('case, name, kwargs, roots', CASES, ids=IDS)
def test_the_pruned_model_infers_as_the_full_one(case, name, kwargs, roots):
    full, pruned = full_and_pruned(name, kwargs)
    x = torch.randn(2, 3, 48, 64)
    with torch.no_grad():
        assert all(torch.equal(a, b) for a, b in zip(full.eval()(x), pruned.eval()(x)))


def test_a_full_checkpoint_loads_with_one_line_naming_the_pruned_modules(caplog):
    full = build('EdgeRecViT')
    pruned = build('EdgeRecViT', out_indices=(1, 2))
    with caplog.at_level('INFO', logger='mmrecvit'):
        pruned.load_state_dict(full.state_dict())  # torch's own load: the pre-hook drops them
    lines = [r.getMessage() for r in caplog.records if r.name == 'mmrecvit' and 'pruned' in r.getMessage()]
    assert lines == [
        "load_state_dict: dropped 14 tensors of ['blocks.2', 'norm'], pruned at build "
        '(out_indices (1, 2) end at layer 2 of 5)'
    ]
    assert all(torch.equal(v, full.state_dict()[k]) for k, v in pruned.state_dict().items())
    with pytest.raises(CheckpointError, match=r'unexpected keys \(1\): blocks\.3\.attn\.qkv\.weight'):
        load_state_dict_into(pruned, {**full.state_dict(), 'blocks.3.attn.qkv.weight': torch.zeros(1)})


def test_the_feature_api_counts_the_kept_layers_as_timm_after_pruning():
    model = build('EdgeRecViT', out_indices=(1, 2)).eval()
    assert (model.depth, model.kept_layers, model.out_indices) == (5, 3, (1, 2))
    x = torch.randn(1, 3, 48, 64)
    with torch.no_grad():
        final, maps = model.forward_intermediates(x)
        assert len(maps) == 3 and torch.equal(maps[-1].flatten(2).transpose(1, 2), final[:, 1:])
    with pytest.raises(ValueError) as info:
        model.forward_intermediates(x, indices=[4])
    message = str(info.value)
    assert len(message.splitlines()) == 1 and 'pruned at build (out_indices (1, 2) end at layer 2 of 5)' in message


def test_outputs_that_reach_the_last_layer_prune_nothing():
    for name in BACKBONE_CASES:
        model = build(name, out_indices=(0, -1))
        assert model.pruned_keys == frozenset() and model.kept_layers == model.depth
