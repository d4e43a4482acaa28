"""The hooks (mmrecvit/mm/hooks/, one file per hook): RecursionHook's aux losses and iteration,
TemperatureScheduleHook's annealing, RNGStateHook's states through a weights-only checkpoint."""

import math
import os.path as osp
import random
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from backbone_cases import tiny_backbone
from helpers import REPO
from torch import nn

from mmrecvit.mm.hooks import RecursionHook, TemperatureScheduleHook, get_rng_states, set_rng_states
from mmrecvit.models import BACKBONES, EdgeRecViT
from mmrecvit.models.numerics import NonFiniteError

sys.path.insert(0, osp.join(REPO, 'tools'))

pytestmark = pytest.mark.usefixtures('one_thread')

TINY = dict(embed_dim=32, num_heads=2, img_size=64)


def test_temperature_schedule_hook_anneals_gumbel_tau():
    hook = TemperatureScheduleHook(start=1.0, end=0.1, schedule='cosine')
    assert hook.value_at(0, 100) == pytest.approx(1.0) and hook.value_at(100, 100) == pytest.approx(0.1)
    assert hook.value_at(50, 100) == pytest.approx(0.55)
    assert TemperatureScheduleHook(1.0, 0.1, schedule='exp').value_at(50, 100) == pytest.approx(math.sqrt(0.1))

    class Runner:
        iter, max_iters = 25, 100

        class message_hub:  # noqa: N801
            values = {}

            @classmethod
            def update_scalar(cls, key, value):
                cls.values[key] = value

    runner = Runner()
    runner.model = torch.nn.Sequential(EdgeRecViT(**TINY, depth=4))
    hook.before_train_iter(runner, 0)
    assert runner.model[0].gumbel_tau == pytest.approx(hook.value_at(25, 100))
    assert Runner.message_hub.values['train/gumbel_tau'] == runner.model[0].gumbel_tau
    with pytest.raises(ValueError, match='TemperatureScheduleHook end'):
        TemperatureScheduleHook(end=0.0)
    runner.model = torch.nn.Sequential(BACKBONES['PlainViT'](**TINY, depth=2))
    with pytest.raises(AttributeError, match="no mmrecvit backbone of the model has 'gumbel_tau'"):
        hook.before_train_iter(runner, 0)


def test_a_checkpoint_keeps_its_temperature_and_its_measured_top1(tmp_path):
    """Issue 45: TemperatureScheduleHook writes the temperature into every checkpoint's meta, StartMetaHook the last
    validation's top-1 into the last checkpoint after the run; read_start_meta reads both, and names a file
    without them."""
    from mmrecvit.mm.hooks import StartMetaHook
    from mmrecvit.mm.start_meta import StartMetaError, read_start_meta

    checkpoint = {'meta': {'epoch': 300}, 'state_dict': {'w': torch.zeros(2)}}
    TemperatureScheduleHook(start=1.0, end=0.1).before_save_checkpoint(
        SimpleNamespace(iter=100, max_iters=100), checkpoint
    )
    path = tmp_path / 'epoch_300.pth'
    torch.save(checkpoint, path)
    (tmp_path / 'last_checkpoint').write_text(str(path))
    runner = SimpleNamespace(
        work_dir=str(tmp_path), val_dataloader=SimpleNamespace(dataset=[0] * 50), cfg=SimpleNamespace(filename='x.py')
    )
    hook = StartMetaHook()
    hook.after_val_epoch(runner, {'accuracy/top1': 79.5})
    hook.after_train(runner)
    meta = read_start_meta(str(path))
    assert meta == dict(
        gumbel_tau=pytest.approx(0.1), imagenet_top1=79.5, val_images=50, val_dataset='list', config='x.py'
    )
    assert torch.load(path)['meta']['epoch'] == 300  # the rest of the checkpoint kept
    with pytest.raises(KeyError, match="no 'accuracy/top1'"):
        hook.after_val_epoch(runner, {'accuracy/top5': 1.0})
    torch.save({'state_dict': {'w': torch.zeros(2)}}, tmp_path / 'bare.pth')
    with pytest.raises(StartMetaError, match=r"bare.pth.*no meta\['mmrecvit_start'\]"):
        read_start_meta(str(tmp_path / 'bare.pth'))


class Detector(nn.Module):  # mmengine's BaseModel protocol: forward(..., mode) -> a loss dict in 'loss' mode
    def __init__(self, name='SRViT'):
        super().__init__()
        self.backbone = tiny_backbone(name)

    def forward(self, x, mode='tensor'):
        outs = self.backbone(x)
        return {'loss_task': sum(o.mean() for o in outs)} if mode == 'loss' else outs


@pytest.mark.parametrize('name', ['SRViT', 'EdgeRecViT'])
def test_recursion_hook_reads_the_iterations_log_in_one_transfer(name):
    """After the step the hook reads every logged tensor (the losses, the statistics: Edge-RecViT's are many) and
    the deferred finiteness checks in one transfer, before RuntimeInfoHook would `.item()` each key (48.2)."""
    from mmengine.hooks import RuntimeInfoHook
    from mmengine.runner.priority import get_priority

    from mmrecvit.benchmark.host_sync import HostSyncCounter

    assert get_priority(RecursionHook.priority) < get_priority(RuntimeInfoHook.priority)
    model = Detector(name).train()
    runner = SimpleNamespace(model=model, iter=3)
    hook = RecursionHook()
    hook.before_train(runner)
    hook.before_train_iter(runner, 0)
    outputs = model(torch.randn(2, 3, 48, 64), mode='loss')
    expected = {k: v.item() for k, v in outputs.items()}
    assert len(outputs) > 3 and model.backbone.finite_checks.pending
    with HostSyncCounter() as counter:
        hook.after_train_iter(runner, 0, outputs=outputs)
    assert counter.syncs == 1, counter.summary()
    assert {k: v.item() for k, v in outputs.items()} == expected
    # every entry a view of the one host copy (on a GPU: CPU tensors, read without waiting)
    assert len({v.untyped_storage().data_ptr() for v in outputs.values()}) == 1
    assert not model.backbone.finite_checks.pending
    hook.after_train(runner)


def test_recursion_hook_adds_the_training_iteration():
    model = Detector().train()
    loss = type(model).forward  # nothing of the model is replaced: torch hooks read the backbone's result
    runner = SimpleNamespace(model=model, iter=16)
    hook = RecursionHook()
    hook.before_train(runner)
    hook.before_train_iter(runner, 0)
    x = torch.randn(2, 3, 48, 64)
    assert set(model(x, mode='loss')) >= {'loss_task', 'w/u0r1'}  # the backbone's terms are added
    assert 'w/u0r1' not in model(x, mode='tensor') and type(model).forward is loss and 'forward' not in vars(model)
    with torch.no_grad():
        model.backbone.routers['0'].proj.bias.fill_(float('inf'))
    outputs = model(x, mode='loss')  # no sync in the forward: the hook reads the check after the step
    with pytest.raises(NonFiniteError, match=r'routers.0 logits at unit 0, recursion 1.*; at training iteration 17'):
        hook.after_train_iter(runner, 0, outputs=outputs)
    hook.after_train(runner)
    with torch.no_grad():
        model.backbone.routers['0'].proj.bias.fill_(0.0)
    assert set(model(x, mode='loss')) == {'loss_task'}  # the hooks are gone after training


def draws():
    return random.random(), np.random.rand(3).tolist(), torch.rand(3).tolist()


def test_rng_states_round_trip_through_a_weights_only_checkpoint(tmp_path):
    states = get_rng_states()
    expected = draws()
    torch.save({'rng_states': {'world_size': 1, 'ranks': [states]}}, tmp_path / 'c.pth')
    loaded = torch.load(tmp_path / 'c.pth', weights_only=True)  # no allow-listing needed
    draws()
    set_rng_states(loaded['rng_states']['ranks'][0])
    assert draws() == expected
