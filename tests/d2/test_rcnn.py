"""detectron2 adapter (mmrecvit/d2/rcnn.py, the recipes): aux losses reach the loss dict and statistics the
EventStorage; the COCO recipes' models (ViTDet heads, Cascade's stages) train a step at a tiny size."""

import warnings

import pytest
import torch
from backbone_cases import BACKBONE_CASES
from detectron2.config import LazyCall as L
from detectron2.config import LazyConfig, instantiate
from detectron2.structures import BitMasks, Boxes, Instances
from detectron2.utils.events import EventStorage
from helpers import REPO, d2_toy_cfg

from mmrecvit.d2 import D2_BACKBONES
from mmrecvit.d2.checkpoint import recvit_backbone

pytestmark = pytest.mark.usefixtures('one_thread')

METHODS = {
    'PlainViT': 'plainvit',
    'NaiveRecursiveViT': 'naiverecvit',
    'SRViT': 'srvit',
    'ReViT': 'revit',
    'EdgeRecViT': 'edgerecvit',
    'MoRViT': 'morvit',
}


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


def built_without_deprecations(model_cfg):
    """`instantiate(model_cfg)`, the shipped configs' classes and arguments by their current names (the common model
    used the deprecated `StepFeaturePyramid`: a DeprecationWarning for every detectron2 user)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always', DeprecationWarning)
        model = instantiate(model_cfg)
    assert not [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    return model


@pytest.mark.parametrize('method', list(METHODS.values()))
def test_aux_losses_reach_the_loss_dict_and_statistics_the_event_storage(method, tmp_path):
    cfg = d2_toy_cfg(method, tmp_path, tmp_path)
    model = built_without_deprecations(cfg.model).train()
    seen = []  # the backbone forward's statistics, read from its result
    recvit_backbone(model).register_forward_hook(lambda module, args, out: seen.append(out.stats))
    with EventStorage() as storage:
        losses = model(toy_batch())
    (stats,) = seen
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


@pytest.mark.parametrize(
    'path', [f'{REPO}/configs/d2/mask_rcnn_srvit_s_100ep.py', f'{REPO}/configs/d2/cascade_mask_rcnn_morvit_s_100ep.py']
)
def test_recipe_builds_and_trains_a_step_at_tiny_size(path):
    """The COCO recipes' models (the ViTDet heads, Cascade's three stages) at a tiny backbone, proposals and RoIs."""
    cfg = LazyConfig.load(path)
    name = cfg.model.backbone.net._target_.__name__
    cfg.model.backbone.net = L(D2_BACKBONES[name])(**BACKBONE_CASES[name])
    cfg.model.backbone.square_pad = 128
    cfg.model.proposal_generator.post_nms_topk = (64, 64)
    cfg.model.roi_heads.batch_size_per_image = 16
    model = built_without_deprecations(cfg.model).train()
    with EventStorage():
        losses = model(toy_batch())
    stages = ('_stage0', '_stage1', '_stage2') if 'cascade' in path else ('',)
    assert {f'loss_{k}{s}' for k in ('cls', 'box_reg') for s in stages} | {'loss_mask'} <= set(losses)
    assert all(torch.isfinite(v) for v in losses.values())


def test_edge_recvit_recipes_anneal_the_gumbel_temperature_in_the_detector(tmp_path):
    """detectron2's equivalent of the mm recipes' TemperatureScheduleHook (issue 37.3): RecViTRCNN sets the
    backbone's tau from the storage's iteration before each training forward, and logs it."""
    from mmrecvit.adapters import TemperatureSchedule

    cfg = d2_toy_cfg('edgerecvit', tmp_path, tmp_path)
    schedule = dict(cfg.model.temperature_schedule)
    assert schedule.pop('max_iter') == cfg.train.max_iter  # the run's iterations ('${train.max_iter}')
    model = instantiate(cfg.model).train()
    with EventStorage(start_iter=cfg.train.max_iter // 2) as storage:
        model(toy_batch())
    want = TemperatureSchedule(**schedule).value_at(cfg.train.max_iter // 2, cfg.train.max_iter)
    assert 0.1 < want < 1.0
    assert recvit_backbone(model).gumbel_tau == pytest.approx(want)
    assert storage.latest()['gumbel_tau'][0] == pytest.approx(want)
    with pytest.raises(ValueError, match='needs max_iter'):
        instantiate(dict(cfg.model, temperature_schedule=dict(start=1.0, end=0.1)))
