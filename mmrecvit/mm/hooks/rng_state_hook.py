"""`RNGStateHook`: exact resume, the random generators' states saved in and restored from checkpoints.

A separate hook, not part of `RecursionHook`, because it concerns every model (mmdet's proposal/RoI
samplers draw random numbers too) and is useful without our backbones; our configs list both.
`get_rng_states` / `set_rng_states` are the states it writes and sets back.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import numpy as np
import torch
from mmengine.dist import all_gather_object, get_rank, get_world_size
from mmengine.hooks import CheckpointHook, Hook
from mmengine.logging import print_log


def get_rng_states() -> dict:
    """This process's Python, numpy, torch (CPU and, when present, CUDA) generator states.

    numpy's key array is stored as a torch tensor so the checkpoint loads with
    `torch.load(weights_only=True)` without allow-listing more numpy types.
    """
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    states = {
        'python': random.getstate(),
        'numpy': (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss),
        'torch': torch.get_rng_state(),
    }
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
        self._val_states: dict | None = None  # this rank's states before a validation
        self._loaded: dict | None = None  # `rng_states` of the checkpoint being loaded
        self._gathered: list | None = None  # every rank's states, gathered before a save

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
            print_log(
                'RNGStateHook: the resumed checkpoint has no rng_states (written without this hook); the '
                'run continues with freshly seeded generators, so it is not an exact resume',
                logger='current',
                level=logging.WARNING,
            )
            return
        world_size = get_world_size()
        if saved['world_size'] != world_size:
            print_log(
                f"RNGStateHook: the checkpoint's rng_states come from {saved['world_size']} process(es), this "
                f'run has {world_size}; generators not restored, so the resume is not exact',
                logger='current',
                level=logging.WARNING,
            )
            return
        states = saved['ranks'][get_rank()]
        loop = runner.train_loop
        if hasattr(loop, 'dataloader_iterator'):  # IterBasedTrainLoop: it fast-forwards runner.iter batches
            loop.dataloader_iterator = _SetStatesAfterSkip(loop, runner.iter, states)
        else:
            set_rng_states(states)
