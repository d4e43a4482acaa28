"""`tools/train.py` that SIGKILLs itself at a chosen point: the subprocess of tests/e2e/test_kill_resume.py.

    python tests/e2e/kill_train.py FAULT:K -- CONFIG [train.py arguments]

FAULT (K counts from 1):
    none                  no fault: the uninterrupted run
    iter:K                at the start of training iteration K+1 (K iterations done, checkpoint K written)
    mid-write:K           inside the K-th checkpoint save, after half of its bytes are on disk
    before-rename:K       the K-th checkpoint complete in its temporary file, not yet renamed
    after-rename:K        the K-th checkpoint renamed into place, `last_checkpoint` not yet rewritten
    before-delete:K       before the K-th deletion of an old checkpoint (`last_checkpoint` already names the new one)

`rank<R>/FAULT` (under torchrun): only the process with `RANK=R` (set by torchrun) has the fault.

The faults patch mmengine's file write (`LocalBackend.put`), `os.replace` and `os.remove` in this
process only; nothing is read from the environment.
"""

import os
import os.path as osp
import signal
import sys

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path[:0] = [REPO, osp.join(REPO, 'tools')]


def die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def install(fault: str) -> None:
    if fault.startswith('rank'):
        rank, fault = fault[len('rank') :].split('/', 1)
        if int(os.environ.get('RANK', '0')) != int(rank):
            return
    if fault == 'none':
        return
    kind, k = fault.split(':')
    k = int(k)
    count = {'n': 0}

    def nth_checkpoint(path) -> bool:  # the k-th time a checkpoint file (not last_checkpoint) is touched
        if not str(path).endswith(('.pth', '.pth.tmp')):
            return False
        count['n'] += 1
        return count['n'] == k

    if kind == 'iter':
        from mmengine.runner.loops import IterBasedTrainLoop

        run_iter = IterBasedTrainLoop.run_iter

        def killing_run_iter(self, data_batch):
            if self._iter == k:
                die()
            return run_iter(self, data_batch)

        IterBasedTrainLoop.run_iter = killing_run_iter
    elif kind == 'mid-write':
        from mmengine.fileio import LocalBackend

        put = LocalBackend.put

        def killing_put(self, obj, filepath):
            if nth_checkpoint(filepath):
                with open(filepath, 'wb') as f:
                    f.write(obj[: len(obj) // 2])
                    f.flush()
                    os.fsync(f.fileno())
                die()
            return put(self, obj, filepath)

        LocalBackend.put = killing_put
    elif kind in ('before-rename', 'after-rename'):
        replace = os.replace

        def killing_replace(src, dst):
            hit = nth_checkpoint(dst)
            if hit and kind == 'before-rename':
                die()
            replace(src, dst)
            if hit:
                die()

        os.replace = killing_replace
    elif kind == 'before-delete':
        remove = os.remove

        def killing_remove(path):
            if nth_checkpoint(path):
                die()
            remove(path)

        os.remove = killing_remove
    else:
        raise SystemExit(f'unknown fault {fault!r}')


if __name__ == '__main__':
    fault, sep, *argv = sys.argv[1:]
    assert sep == '--', sys.argv
    install(fault)
    import train  # noqa: E402  (tools/train.py)

    from mmrecvit.mm.dist import exit_distributed_process

    train.main(argv)
    exit_distributed_process()  # as tools/train.py does after a torchrun launch; else nothing
