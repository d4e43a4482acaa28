"""`tools/train.py` that SIGKILLs itself at a chosen point: the subprocess of tests/e2e/test_kill_resume.py.

    python tests/e2e/kill_train.py FAULT:K -- CONFIG [train.py arguments]
    python tests/e2e/kill_train.py --serve CONFIG

`--serve` imports tools/train.py (torch, mmengine, mmrecvit) and builds CONFIG's model once (mmseg's models and
what they import), then for each
JSON line `[FAULT, LOG, ARGV]` on stdin forks a child that writes its output to LOG, has FAULT and runs
`train.main(ARGV)`, and answers a line with the child's status (`subprocess`'s returncode: -9 when SIGKILLed). Each
killed run is still a process of its own killed mid-write; only the interpreter start and imports are shared.

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


def child(fault: str, log: str, argv: list[str]) -> None:
    """In a forked child of `serve`: output to `log`, the fault, `train.main(argv)`; never returns."""
    code = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        signal.alarm(900)  # a run that hangs ends (SIGALRM) instead of blocking the test that waits for it
        install(fault)
        import train  # noqa: E402  (tools/train.py)

        train.main(argv)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(warm_config: str) -> None:
    """The fork server: one interpreter start and one import of everything for every killed run."""
    import json

    import train  # noqa: F401, E402  (tools/train.py: torch, mmengine, mmrecvit.mm)
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope

    cfg = Config.fromfile(warm_config)
    init_default_scope(cfg.default_scope)  # imports the task's modules (mmseg's models, datasets, metrics)
    MODELS.build(cfg.model)  # and every module the toy's model needs
    print('ready', flush=True)
    for line in sys.stdin:
        fault, log, argv = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child(fault, log, argv)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)


if __name__ == '__main__':
    if sys.argv[1] == '--serve':
        serve(sys.argv[2])
        os._exit(0)  # stdin closed: no interpreter teardown of torch and the OpenMMLab stack (seconds)
    fault, sep, *argv = sys.argv[1:]
    assert sep == '--', sys.argv
    install(fault)
    import train  # noqa: E402  (tools/train.py)

    from mmrecvit.mm.dist import exit_distributed_process

    train.main(argv)
    exit_distributed_process()  # as tools/train.py does after a torchrun launch; else nothing
