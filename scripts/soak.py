"""Soak run (issue 19, part 4): toy training with evaluation and checkpoints, RSS sampled throughout.

    python scripts/soak.py --task seg --iters 300 --val-interval 50 [--data-root data] [--work-dir work_dirs/soak]

Runs `tools/train.py` on a toy config in a subprocess (the toy sets are made under --data-root if
absent), samples the process's resident set size from /proc every --every seconds (written to
WORK_DIR/rss.csv and drawn in WORK_DIR/rss.png), and prints the growth after warm-up (the first --warmup
fraction of the run): the median RSS of the last fifth of the remaining samples minus that of the first
fifth, in MiB (medians, so that one evaluation's transient peak does not count as growth).
Then evaluates the last checkpoint twice with `tools/test.py` and compares the two metric sets.
Exit status 1 when the growth exceeds --bound MiB or the two evaluations differ. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import os.path as osp
import statistics
import subprocess
import sys
import time

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
CONFIGS = {
    'det': 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py',
    'seg': 'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py',
}


def rss_mib(pid: int) -> float | None:
    try:
        with open(f'/proc/{pid}/status') as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def write_trace(samples: list[tuple[float, float]], warmup_s: float, work_dir: str, title: str) -> None:
    """rss.csv (seconds, MiB) and rss.png (RSS over time, the warm-up shaded)."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    with open(osp.join(work_dir, 'rss.csv'), 'w', newline='') as f:
        csv.writer(f).writerows([('seconds', 'rss_mib'), *((f'{t:.2f}', f'{r:.1f}') for t, r in samples)])
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot([t for t, _ in samples], [r for _, r in samples], lw=1)
    ax.axvspan(0, warmup_s, color='0.9', label='warm-up')
    ax.set(xlabel='seconds', ylabel='RSS (MiB)', title=title)
    ax.legend(loc='lower right')
    fig.tight_layout()
    fig.savefig(osp.join(work_dir, 'rss.png'), dpi=100)
    plt.close(fig)


def evaluate(config: str, checkpoint: str, work_dir: str, options: list[str], env: dict) -> dict:
    """The metrics `tools/test.py` reports for `checkpoint` (read from the json log mmengine writes)."""
    run = subprocess.run(
        [
            sys.executable,
            osp.join(REPO, 'tools', 'test.py'),
            config,
            checkpoint,
            '--work-dir',
            work_dir,
            '--cfg-options',
            *options,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        raise SystemExit(f'tools/test.py {checkpoint} failed:\n{run.stderr[-3000:]}')
    (log,) = glob.glob(osp.join(work_dir, '*', '*.json'))
    with open(log) as f:
        return json.loads(f.read().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--task', choices=sorted(CONFIGS), default='seg')
    parser.add_argument('--iters', type=int, default=300)
    parser.add_argument('--val-interval', type=int, default=50)
    parser.add_argument('--data-root', default=osp.join(REPO, 'data'))
    parser.add_argument('--work-dir', default=osp.join(REPO, 'work_dirs', 'soak'))
    parser.add_argument('--every', type=float, default=0.5, help='seconds between RSS samples')
    parser.add_argument('--warmup', type=float, default=0.2, help='fraction of the run counted as warm-up')
    parser.add_argument('--bound', type=float, default=200.0, help='allowed RSS growth after warm-up, MiB')
    args = parser.parse_args(argv)
    sys.path.insert(0, REPO)
    from mmrecvit.datasets import make_toy_data, toy_data_cfg

    if not osp.isdir(osp.join(args.data_root, 'toy_coco' if args.task == 'det' else 'toy_ade')):
        make_toy_data(args.data_root, progress=False)
    data_options = [f'{k}={v}' for k, v in toy_data_cfg(args.task, args.data_root).items()]
    options = [
        f'train_cfg.max_iters={args.iters}',
        f'train_cfg.val_interval={args.val_interval}',
        f'default_hooks.checkpoint.interval={args.val_interval}',
        'default_hooks.logger.interval=50',
        *data_options,
    ]
    cmd = [
        sys.executable,
        osp.join(REPO, 'tools', 'train.py'),
        osp.join(REPO, CONFIGS[args.task]),
        '--work-dir',
        args.work_dir,
        '--cfg-options',
        *options,
    ]
    start = time.monotonic()
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')])}  # this checkout
    os.makedirs(args.work_dir, exist_ok=True)
    err = open(osp.join(args.work_dir, 'soak_stderr.txt'), 'w+')  # a file, not a pipe: a full pipe would block it
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
    samples = []
    while proc.poll() is None:
        rss = rss_mib(proc.pid)
        if rss is not None:
            samples.append((time.monotonic() - start, rss))
        time.sleep(args.every)
    if proc.returncode != 0:
        err.seek(0)
        print(err.read()[-3000:], file=sys.stderr)
        return proc.returncode
    if len(samples) < 4:
        print('run too short to measure')
        return 0
    total = samples[-1][0]
    warm = [r for t, r in samples if t >= args.warmup * total]
    fifth = max(1, len(warm) // 5)
    first, last = statistics.median(warm[:fifth]), statistics.median(warm[-fifth:])
    growth = last - first
    write_trace(
        samples,
        args.warmup * total,
        args.work_dir,
        f'{args.task}, {args.iters} iterations, evaluation and checkpoint every {args.val_interval}',
    )
    print(
        f'{args.task}: {args.iters} iterations in {total:.0f}s, {len(samples)} RSS samples; after warm-up: '
        f'median {first:.0f} MiB (first fifth), {last:.0f} MiB (last fifth), peak {max(r for _, r in samples):.0f} '
        f'MiB, growth {growth:+.1f} MiB (bound {args.bound:g}); trace {args.work_dir}/rss.png',
        flush=True,
    )
    checkpoint = osp.join(args.work_dir, f'iter_{args.iters}.pth')
    first, second = (
        {
            k: v
            for k, v in evaluate(cmd[2], checkpoint, osp.join(args.work_dir, f'eval_{i}'), data_options, env).items()
            if k not in ('time', 'data_time')
        }
        for i in (1, 2)
    )  # the timings differ run to run; every metric must not
    same = first == second
    print(
        f'{args.task}: {checkpoint} evaluated twice: {"identical" if same else "DIFFERENT"} metrics {first}'
        + ('' if same else f' vs {second}')
    )
    return int(growth > args.bound or not same)


if __name__ == '__main__':
    sys.exit(main())
