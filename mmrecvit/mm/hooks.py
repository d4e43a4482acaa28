"""Training hooks: our backbones' losses and statistics in the loss dict, and exact resume.

`RecursionHook`: mmdet's detectors and mmseg's segmentors build their loss dict in `loss()` from
their heads only. Before training starts this hook wraps that one method *on the model instance*
(the class is untouched) so that, after each forward, every mmrecvit backbone's `stats.aux_losses`
(`loss_*`, summed into the total loss by mmengine) and `stats.scalars` (logged, not summed) are
added to the dict. They then appear by name in the standard training log, for any detector or
segmentor, with no user code: our configs list the hook in `custom_hooks`. A backbone's
`NonFiniteError` (NaN/inf router logits or aux losses, `mmrecvit.models.numerics`) leaves the
wrapped `loss()` with the training iteration added to its message.

`RNGStateHook`: exact resume (see its docstring). A separate hook, not part of `RecursionHook`,
because it concerns every model (mmdet's proposal/RoI samplers draw random numbers too) and is
useful without our backbones; our configs list both.

`TF32Hook`: lets fp32 matrix products and convolutions use TensorFloat-32 on GPUs that have it
(mmengine has no switch for it); our configs list it too.

`AtomicCheckpointHook`: mmengine's `CheckpointHook`, but a kill at any moment (also inside a save)
leaves `last_checkpoint` naming a complete checkpoint (write to a temporary file + fsync + rename,
then `last_checkpoint`, then deleting the old ones); our configs use it as `default_hooks.checkpoint`.
"""
from __future__ import annotations

import logging
import math
import os
import os.path as osp
import random
from typing import Any

import numpy as np
import torch
from mmengine.dist import all_gather_object, get_rank, get_world_size, is_main_process
from mmengine.fileio import LocalBackend
from mmengine.hooks import CheckpointHook, Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper

from ..adapters import backbone_terms
from ..models import ViTBackbone
from ..models.checks import check_bool, check_choice, check_float, check_int
from ..models.numerics import NonFiniteError


def collect_backbone_outputs(model: Any) -> dict:
    """Aux losses (with graph) and detached scalars of every mmrecvit backbone in `model`, in one
    dict: mmengine sums the `loss*` entries and logs the rest."""
    losses, scalars = backbone_terms(model)
    return {**losses, **scalars}


class RecursionHook(Hook):
    """Add mmrecvit backbones' aux losses and statistics to the model's loss dict."""

    priority = 'NORMAL'

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        backbones = [m for m in model.modules() if isinstance(m, ViTBackbone)]
        if not backbones or getattr(model, '_mmrecvit_loss_wrapped', False):
            return
        original_loss = model.loss

        def loss_with_backbone_terms(*args: Any, **kwargs: Any) -> dict:
            try:
                losses = original_loss(*args, **kwargs)
            except NonFiniteError as e:
                raise NonFiniteError(f'{e}; at training iteration {runner.iter + 1}') from e
            for k, v in collect_backbone_outputs(model).items():
                if k in losses:
                    raise KeyError(f'RecursionHook: the model already returns a loss named {k!r}')
                losses[k] = v
            return losses

        model.loss = loss_with_backbone_terms
        model._mmrecvit_loss_wrapped = True


# ---- exact resume ---------------------------------------------------------------------------------
def get_rng_states() -> dict:
    """This process's Python, numpy, torch (CPU and, when present, CUDA) generator states.

    numpy's key array is stored as a torch tensor so the checkpoint loads with
    `torch.load(weights_only=True)` without allow-listing more numpy types.
    """
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    states = {'python': random.getstate(), 'numpy': (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss,
                                                      gauss),
              'torch': torch.get_rng_state()}
    if torch.cuda.is_available():
        states['cuda'] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    """Inverse of `get_rng_states` (CUDA states only when as many devices are visible)."""
    random.setstate(states['python'])
    kind, keys, pos, has_gauss, gauss = states['numpy']
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(states['torch'])
    cuda = states.get('cuda')
    if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)


class _SetStatesAfterSkip:
    """Stands in for an `IterBasedTrainLoop`'s `dataloader_iterator` during its fast-forward.

    On resume, mmengine 0.10.7's loop skips the `runner.iter` batches already trained by fetching
    them, which runs their (random) data pipelines again and draws from the global generators
    (with `num_workers=0`). After the last skipped batch this proxy sets the checkpoint's states
    and puts the real iterator back, so the next batch is drawn exactly as in the uninterrupted run.
    """

    def __init__(self, loop: Any, skip: int, states: dict) -> None:
        self.loop, self.inner, self.left, self.states = loop, loop.dataloader_iterator, skip, states

    def __iter__(self) -> _SetStatesAfterSkip:
        return self

    def __next__(self) -> Any:
        batch = next(self.inner)
        self.left -= 1
        if self.left <= 0:
            set_rng_states(self.states)
            self.loop.dataloader_iterator = self.inner
        return batch


class RNGStateHook(Hook):
    """Exact resume: the random generators' states are saved in, and restored from, checkpoints.

    mmengine 0.10.7 re-seeds on resume but stores no generator state, so a resumed run draws
    different drop-path masks, Gumbel noise (Edge-RecViT), step dropout (reViT), sampler choices
    (mmdet's RPN/RoI samplers) and data augmentation than the uninterrupted run would have. With
    this hook, a run interrupted after k iterations and resumed with `--resume` ends with
    bit-identical weights on CPU with `randomness=dict(seed=..., deterministic=True)`
    (`tests/e2e/test_kill_resume.py`). How:

    * the states of Python's `random`, numpy and torch (CPU, and CUDA when present) as they are
      when a checkpoint is written (the end of a training iteration or epoch) go into it as
      `rng_states`; in a distributed run every rank's states are gathered then (one small
      `all_gather_object` per checkpoint, in `after_train_iter`/`after_train_epoch` on every rank
      when a `CheckpointHook` is about to save: mmengine's `Runner.save_checkpoint`, which calls
      `before_save_checkpoint`, runs on rank 0 only, where a collective would deadlock) and each
      rank gets its own back;
    * validation during training does not consume the training streams: the states are set back
      after each validation, so a checkpoint written before a validation resumes exactly, and the
      validation schedule does not change the training trajectory (a decision; mmengine alone lets
      validation draw from the same generators);
    * on resume (`runner.iter > 0` at `before_train`; a plain `load_from` restores nothing) the
      states are set back after the loop's fast-forward over the data already trained
      (`_SetStatesAfterSkip`), or at `before_train` for loops without one (epoch-based).
      A checkpoint from another world size is resumed without its states (logged warning).

    Priority 'LOW': after the NORMAL hooks of an iteration, before `CheckpointHook` (VERY_LOW).
    """

    priority = 'LOW'

    def __init__(self) -> None:
        self._val_states: dict | None = None       # this rank's states before a validation
        self._loaded: dict | None = None           # `rng_states` of the checkpoint being loaded
        self._gathered: list | None = None         # every rank's states, gathered before a save

    def before_val(self, runner) -> None:
        self._val_states = get_rng_states()

    def after_val(self, runner) -> None:
        if self._val_states is not None:
            set_rng_states(self._val_states)
            self._val_states = None

    def _gather_if_saving(self, runner, by_epoch: bool) -> None:
        """In a distributed run, gather every rank's states when a `CheckpointHook` is about to save.

        `Runner.save_checkpoint` (and so `before_save_checkpoint`) runs on rank 0 only
        (`@master_only`): a collective there would wait forever for the other ranks, so the
        gathering happens here, on every rank, just before the checkpoint hook (VERY_LOW) runs."""
        self._gathered = None
        if get_world_size() == 1:
            return
        for hook in runner.hooks:
            if isinstance(hook, CheckpointHook) and hook.by_epoch == by_epoch and hook.interval > 0:
                every = hook.every_n_epochs if by_epoch else hook.every_n_train_iters
                last = hook.is_last_train_epoch if by_epoch else hook.is_last_train_iter
                if every(runner, hook.interval, hook.save_begin) or (hook.save_last and last(runner)):
                    self._gathered = all_gather_object(get_rng_states())
                    return

    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        self._gather_if_saving(runner, by_epoch=False)

    def after_train_epoch(self, runner) -> None:
        self._gather_if_saving(runner, by_epoch=True)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        ranks, self._gathered = self._gathered, None
        if ranks is None:  # one process, or a save the gathering did not foresee (then only rank 0's states)
            ranks = [get_rng_states()]
        checkpoint['rng_states'] = {'world_size': len(ranks), 'ranks': ranks}

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        self._loaded = checkpoint.get('rng_states')

    def before_train(self, runner) -> None:
        saved, self._loaded = self._loaded, None
        if runner.iter == 0:
            return  # not a resume (or a `load_from` of weights only): the config's seed rules
        if saved is None:
            print_log('RNGStateHook: the resumed checkpoint has no rng_states (written without this hook); the '
                      'run continues with freshly seeded generators, so it is not an exact resume',
                      logger='current', level=logging.WARNING)
            return
        world_size = get_world_size()
        if saved['world_size'] != world_size:
            print_log(f"RNGStateHook: the checkpoint's rng_states come from {saved['world_size']} process(es), this "
                      f'run has {world_size}; generators not restored, so the resume is not exact',
                      logger='current', level=logging.WARNING)
            return
        states = saved['ranks'][get_rank()]
        loop = runner.train_loop
        if hasattr(loop, 'dataloader_iterator'):  # IterBasedTrainLoop: it fast-forwards runner.iter batches
            loop.dataloader_iterator = _SetStatesAfterSkip(loop, runner.iter, states)
        else:
            set_rng_states(states)


class TemperatureScheduleHook(Hook):
    """Anneal a backbone temperature over training: Edge-RecViT's Gumbel-softmax `gumbel_tau`.

    tau goes from `start` to `end` over the training iterations [`begin`, `stop`) (default: the
    whole run) and stays at `end` afterwards, with `schedule` 'cosine', 'linear' or 'exp'
    (geometric). Before each training iteration the attribute is set on every mmrecvit backbone
    that has it, and logged as `train/<attribute>`. The value is a function of the iteration, so a
    resumed run continues the schedule exactly.

        custom_hooks = [..., dict(type='TemperatureScheduleHook', start=1.0, end=0.1)]
    """

    priority = 'NORMAL'
    SCHEDULES = ('cosine', 'linear', 'exp')

    def __init__(self, start: float = 1.0, end: float = 0.1, begin: int = 0, stop: int | None = None,
                 schedule: str = 'cosine', attribute: str = 'gumbel_tau') -> None:
        name = 'TemperatureScheduleHook'
        start = check_float(f'{name} start', start, 0.0, math.inf, low_open=True)
        end = check_float(f'{name} end', end, 0.0, math.inf, low_open=True)
        check_choice(f'{name} schedule', schedule, self.SCHEDULES)
        check_int(f'{name} begin', begin, 0)
        if stop is not None:
            check_int(f'{name} stop', stop, begin + 1)
        self.start, self.end, self.begin, self.stop = float(start), float(end), begin, stop
        self.schedule, self.attribute = schedule, attribute

    def value_at(self, iteration: int, max_iters: int) -> float:
        stop = self.stop if self.stop is not None else max_iters
        t = min(max((iteration - self.begin) / max(stop - self.begin, 1), 0.0), 1.0)
        if self.schedule == 'linear':
            return self.start + (self.end - self.start) * t
        if self.schedule == 'exp':
            return self.start * (self.end / self.start) ** t
        return self.end + (self.start - self.end) * 0.5 * (1 + math.cos(math.pi * t))

    def before_train_iter(self, runner, batch_idx: int, data_batch: Any = None) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        targets = [m for m in model.modules() if isinstance(m, ViTBackbone) and hasattr(m, self.attribute)]
        if not targets:
            raise AttributeError(f'TemperatureScheduleHook: no mmrecvit backbone of the model has {self.attribute!r}')
        value = self.value_at(runner.iter, runner.max_iters)
        for m in targets:
            setattr(m, self.attribute, value)
        runner.message_hub.update_scalar(f'train/{self.attribute}', value)


class TF32Hook(Hook):
    """Allow (or forbid) TensorFloat-32 in fp32 matrix products and cuDNN convolutions, before the run.

    PyTorch computes fp32 matmuls in full fp32 by default (`torch.backends.cuda.matmul.allow_tf32 =
    False`; cuDNN convolutions already allow TF32), which on Ampere and later GPUs is several times
    slower than TF32's 10-bit-mantissa products with fp32 accumulation. The recipes we follow were
    trained with it (PyTorch before 1.12, of the ViTDet and ViT-Adapter papers' time, allowed TF32
    matmuls by default); under AMP it still concerns what runs in fp32: the fp32 parts of the heads,
    and the whole model in evaluation without autocast. mmengine has no switch for it,
    hence this hook; it sets both flags in `before_run` (process-wide, as PyTorch's flags are), a
    no-op on CPU.

        custom_hooks = [..., dict(type='TF32Hook')]          # allow=False keeps full fp32
    """

    priority = 'VERY_HIGH'

    def __init__(self, allow: bool = True) -> None:
        self.allow = check_bool('TF32Hook allow', allow)

    def before_run(self, runner) -> None:
        torch.backends.cuda.matmul.allow_tf32 = self.allow
        torch.backends.cudnn.allow_tf32 = self.allow


# ---- atomic checkpoints -----------------------------------------------------------------------------
def replace_atomically(tmp_path: str, path: str) -> None:
    """fsync `tmp_path`, rename it over `path` (atomic on POSIX in one file system), fsync the folder."""
    with open(tmp_path, 'rb+') as f:
        os.fsync(f.fileno())
    os.replace(tmp_path, path)
    dir_fd = os.open(osp.dirname(osp.abspath(path)) or '.', os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_text_atomically(path: str, text: str) -> None:
    tmp = f'{path}.tmp'
    with open(tmp, 'w') as f:
        f.write(text)
    replace_atomically(tmp, path)


class AtomicCheckpointHook(CheckpointHook):
    """mmengine's `CheckpointHook` whose checkpoints survive a kill at any moment (issue 19).

    mmengine 0.10.7's hook, for `max_keep_ckpts=k`, first deletes the oldest checkpoint, then writes
    the new one in place (`open(path, 'wb')`), then `work_dir/last_checkpoint`. A process killed
    while writing leaves a half-written `iter_N.pth`; with `max_keep_ckpts=1` (our toy configs) the
    only complete checkpoint is already gone, and `last_checkpoint` still names the deleted file.
    Here, for local folders:

    1. the checkpoint is written to `.<name>.tmp` in the same folder, fsynced, and renamed over
       `<name>` (`os.replace`: a reader sees the old file or the whole new one, never a part);
    2. only then is `last_checkpoint` rewritten (also by write + rename), so it always names a
       complete file, which is what `--resume` loads;
    3. only then are the checkpoints beyond `max_keep_ckpts` deleted.

    A kill between 2 and 3 leaves one extra old checkpoint; a kill in 1 leaves a `.tmp` file,
    deleted when training starts again. The files' contents (`keep_ckpt_ids` in the message hub
    included) are those mmengine writes. Remote `out_dir`s (`s3://`, ...) keep mmengine's
    behaviour. A subclass of the hook, not a patch of mmengine, so it shows in the config:
    `default_hooks.checkpoint.type='AtomicCheckpointHook'` in all our configs.
    """

    TMP = '.{}.tmp'

    def _local(self) -> bool:
        return isinstance(self.file_backend, LocalBackend)

    def before_train(self, runner) -> None:
        super().before_train(runner)
        if self._local() and is_main_process() and osp.isdir(self.out_dir):
            for name in os.listdir(self.out_dir):
                if name.startswith('.') and name.endswith('.tmp'):  # a save killed half-way
                    os.remove(osp.join(self.out_dir, name))
                    print_log(f'AtomicCheckpointHook: removed the incomplete {name} of an interrupted save',
                              logger='current', level=logging.WARNING)

    def _save_checkpoint_with_step(self, runner, step, meta) -> None:
        if not self._local():
            return super()._save_checkpoint_with_step(runner, step, meta)
        drop = []
        if self.max_keep_ckpts > 0 and not (self.keep_ckpt_ids and self.keep_ckpt_ids[-1] == step):
            while len(self.keep_ckpt_ids) >= self.max_keep_ckpts:
                drop.append(self.keep_ckpt_ids.popleft())
            self.keep_ckpt_ids.append(step)
            runner.message_hub.update_info('keep_ckpt_ids', list(self.keep_ckpt_ids))
        name = self.filename_tmpl.format(step)
        self.last_ckpt = osp.join(self.out_dir, name)
        runner.message_hub.update_info('last_ckpt', self.last_ckpt)
        tmp = self.TMP.format(name)
        runner.save_checkpoint(self.out_dir, tmp, self.file_client_args, save_optimizer=self.save_optimizer,
                               save_param_scheduler=self.save_param_scheduler, meta=meta, by_epoch=self.by_epoch,
                               backend_args=self.backend_args, **self.args)
        if not is_main_process():  # mmengine writes on rank 0 only
            return
        replace_atomically(osp.join(self.out_dir, tmp), self.last_ckpt)
        write_text_atomically(osp.join(runner.work_dir, 'last_checkpoint'), self.last_ckpt)
        for old in drop:
            path = osp.join(self.out_dir, self.filename_tmpl.format(old))
            if osp.isfile(path):
                os.remove(path)


HOOK_CLASSES = {'RecursionHook': RecursionHook, 'RNGStateHook': RNGStateHook,
                'TemperatureScheduleHook': TemperatureScheduleHook, 'TF32Hook': TF32Hook,
                'AtomicCheckpointHook': AtomicCheckpointHook}
