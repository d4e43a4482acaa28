"""Distributed start-up for CPU-only machines (mmengine 0.10.7 assumes GPUs).

mmengine's `init_dist` calls `torch.cuda.set_device` unconditionally, and its Runner wraps the
model in DDP with `device_ids=[LOCAL_RANK]`; on a machine without a GPU both fail ("Found no
NVIDIA driver", "device_ids ... CPU modules"). When no GPU is visible we start the process group
with the `gloo` backend ourselves (the Runner then skips its own `init_dist`) and ask for DDP
without device ids. With a GPU nothing changes: mmengine uses its configured backend (nccl).
"""

from __future__ import annotations

import logging
import os
import sys

import torch
import torch.distributed as dist


def setup_cpu_distributed(cfg, launcher: str) -> bool:
    """Prepare `cfg` for a CPU distributed run; returns True if it did (no GPU, launcher set)."""
    if launcher == 'none' or torch.cuda.is_available():
        return False
    if launcher != 'pytorch':
        raise ValueError(
            f'--launcher {launcher!r} needs GPUs in mmengine 0.10.7; on CPU-only machines use '
            '--launcher pytorch (tools/dist_train.sh / tools/dist_test.sh start it with torchrun)'
        )
    missing = [k for k in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT') if k not in os.environ]
    if missing:
        raise RuntimeError(
            f'--launcher pytorch expects torchrun environment variables; missing {missing}. '
            'Start through tools/dist_train.sh CONFIG NUM_PROCS.'
        )
    if not dist.is_initialized():
        dist.init_process_group(backend='gloo', rank=int(os.environ['RANK']), world_size=int(os.environ['WORLD_SIZE']))
    cfg.env_cfg.setdefault('dist_cfg', {})['backend'] = 'gloo'
    wrapper = dict(cfg.get('model_wrapper_cfg') or {})
    wrapper.setdefault('type', 'MMDistributedDataParallel')
    wrapper['device_ids'] = None
    wrapper.setdefault('broadcast_buffers', False)
    wrapper.setdefault('find_unused_parameters', cfg.get('find_unused_parameters', False))
    cfg.model_wrapper_cfg = wrapper
    return True


def exit_distributed_process() -> None:
    """End a successful process of a distributed run (`tools/train.py`, `tools/test.py` under torchrun).

    Destroys the default process group, flushes the logs and standard streams, and leaves with
    `os._exit(0)`, skipping the interpreter's finalisation: with gloo, c10d threads still alive at
    that point made one process in a few abort after all work was done (`terminate called without
    an active exception`, SIGABRT; seen here even after `destroy_process_group`), and torchrun then
    reported the run as failed. Everything of the run (checkpoints, logs) is written before this is
    called. Returns (does nothing) when no process group was started. Only for a successful run:
    destroying the group while another rank is inside a collective would hang.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    dist.destroy_process_group()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
