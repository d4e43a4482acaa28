"""One vocabulary (issue 27): `depth` and `out_indices` mean the same in every backbone, so a config that swaps only
`type=` between any two of the six, with the first one's own extras removed, builds and trains.

The shared words are `ViTBackbone`'s arguments plus the sizes (`arch`, `embed_dim`, `num_heads`, `depth`); a
method's own arguments (SR-ViT's unit sizes, reViT's experts, ...) are the extras a swap drops.
"""

import inspect
import itertools

import pytest
import torch
from helpers import REPO, cached_config
from mmengine.optim import OptimWrapper
from mmengine.registry import init_default_scope
from mmengine.runner import Runner

from mmrecvit.models import BACKBONES, ViTBackbone

METHODS = {
    'PlainViT': 'plainvit',
    'NaiveRecursiveViT': 'naiverecvit',
    'SRViT': 'srvit',
    'ReViT': 'revit',
    'EdgeRecViT': 'edgerecvit',
    'MoRViT': 'morvit',
}
SHARED = {'arch', 'embed_dim', 'num_heads'} | set(inspect.signature(ViTBackbone.__init__).parameters) - {'self'}
TOY = f'{REPO}/configs/det/mask-rcnn_{{}}-ti_fpn_1xb2-800it_toy-coco.py'


def shared_backbone(name):
    """The toy detector's backbone of `name` with its own extras removed."""
    backbone = dict(cached_config(TOY.format(METHODS[name])).model.backbone)
    return {k: v for k, v in backbone.items() if k in SHARED}


def test_every_toy_states_its_depth_in_the_shared_words():
    """What a swap keeps: every toy says how deep it is with `depth` (6 layers), none with its own word."""
    assert {name: shared_backbone(name).get('depth') for name in METHODS} == dict.fromkeys(METHODS, 6)


@pytest.fixture(scope='module')
def toy_batch(toy_root):
    cfg = cached_config(TOY.format('plainvit'))
    loader = cfg.train_dataloader
    loader.update(batch_size=1, num_workers=0, persistent_workers=False)
    loader.dataset.data_root = f'{toy_root}/toy_coco/'
    return next(iter(Runner.build_dataloader(loader)))


@pytest.mark.slow
@pytest.mark.usefixtures('one_thread')
@pytest.mark.parametrize('source, target', list(itertools.permutations(METHODS, 2)))
def test_swapping_only_the_type_builds_and_trains_a_toy_step(source, target, toy_batch):
    from mmdet.registry import MODELS

    cfg = cached_config(TOY.format(METHODS[source]))
    cfg.model.backbone = dict(type=target, **shared_backbone(source))
    init_default_scope('mmdet')
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    assert type(model.backbone) is BACKBONES[target] and model.backbone.depth == 6
    assert len(model.backbone.out_indices) == 4  # the neck's four levels
    before = model.backbone.patch_embed.proj.weight.detach().clone()
    log_vars = model.train_step(toy_batch, OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.01)))
    assert torch.isfinite(log_vars['loss'])
    assert not torch.equal(before, model.backbone.patch_embed.proj.weight)
