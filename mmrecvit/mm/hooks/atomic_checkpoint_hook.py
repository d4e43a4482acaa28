"""`AtomicCheckpointHook`: mmengine's `CheckpointHook`, but a kill at any moment (also inside a save)
leaves `last_checkpoint` naming a complete checkpoint (write to a temporary file + fsync + rename,
then `last_checkpoint`, then deleting the old ones); our configs use it as `default_hooks.checkpoint`.
"""

from __future__ import annotations

import logging
import os
import os.path as osp

from mmengine.dist import is_main_process
from mmengine.fileio import LocalBackend
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log


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
                    print_log(
                        f'AtomicCheckpointHook: removed the incomplete {name} of an interrupted save',
                        logger='current',
                        level=logging.WARNING,
                    )

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
        runner.save_checkpoint(
            self.out_dir,
            tmp,
            self.file_client_args,
            save_optimizer=self.save_optimizer,
            save_param_scheduler=self.save_param_scheduler,
            meta=meta,
            by_epoch=self.by_epoch,
            backend_args=self.backend_args,
            **self.args,
        )
        if not is_main_process():  # mmengine writes on rank 0 only
            return
        replace_atomically(osp.join(self.out_dir, tmp), self.last_ckpt)
        write_text_atomically(osp.join(runner.work_dir, 'last_checkpoint'), self.last_ckpt)
        for old in drop:
            path = osp.join(self.out_dir, self.filename_tmpl.format(old))
            if osp.isfile(path):
                os.remove(path)
