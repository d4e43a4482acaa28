"""Host syncs counted on any device: the operations that make the host wait for a CUDA stream, seen on the CPU.

On a GPU `torch.cuda.set_sync_debug_mode` reports every sync (the GPU check uses it). On the CPU nothing waits, but
the same operations run: `HostSyncCounter` sees them through a `TorchDispatchMode` (aten operators, the forward and
the backward alike) and a `TorchFunctionMode` (reads to the host that dispatch nothing on a CPU tensor):

* syncs: a tensor read as a Python number (`.item()`, `bool()`, `int()`, `float()`: `aten._local_scalar_dense`) or
  list (`.tolist()`), a copy to the host (`.cpu()`, `.numpy()`), and the operators whose output size depends on the
  data (`nonzero`, `masked_select`, `unique`, `repeat_interleave` without `output_size`, indexing with a boolean
  mask), which read a count back before they can allocate;
* uploads, counted apart (`uploads`): tensors made from Python data (`torch.tensor([...])`, `aten.lift_fresh`) and
  copies of a CPU tensor to another device (`aten._to_copy` with a `device=`, `aten.copy_` into a tensor elsewhere):
  on a GPU a host-to-device copy from pageable memory, which torch makes with a stream sync (`memcpy_and_sync`; a
  CPU-only run sees the `torch.tensor` they start from, or a copy to the meta device).

`counts` holds each operator's count, so a report can say what synced. It does not see a kernel's own reads below
the dispatcher, nor a sync made outside torch (e.g. a C extension's), nor host memory read as raw bytes (the
non-finite guard's deferred flags, `numerics.PendingChecks.host_values`: on a GPU a pinned buffer read once its copy's
event has completed, no wait; on the CPU the flags themselves); reads that operators make on the CPU only
(`one_hot`'s class-range check, which CUDA leaves to a device assert) are not counted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

_aten = torch.ops.aten
SYNC_OPS = {
    _aten._local_scalar_dense.default,
    _aten.nonzero.default,
    _aten.masked_select.default,
    _aten._unique2.default,
    _aten.unique_dim.default,
    _aten.unique_consecutive.default,
    _aten.repeat_interleave.Tensor,  # a sync unless output_size is given
}
MASK_INDEXING = {_aten.index.Tensor, _aten.index_put.default, _aten.index_put_.default, _aten._index_put_impl_.default}
UPLOAD_OPS = {_aten.lift_fresh.default}
UPLOAD = 'host-to-device copy'  # `counts`' name for the copies of a CPU tensor to another device
UPLOAD_NAMES = (str(_aten.lift_fresh.default), UPLOAD)
HOST_READS = {torch.Tensor.tolist, torch.Tensor.cpu, torch.Tensor.numpy}


def _device_type(device: Any) -> str | None:
    return None if device is None else torch.device(device).type


def _upload(func: Any, args: tuple, kwargs: dict) -> bool:
    """A copy of a CPU tensor to another device: `.to(device)` (`_to_copy`) or `dst.copy_(src)`."""
    if func is _aten._to_copy.default:
        target = _device_type(kwargs.get('device'))
        return args[0].device.type == 'cpu' and target not in (None, 'cpu')
    if func is _aten.copy_.default:
        return args[1].device.type == 'cpu' and args[0].device.type != 'cpu'
    return False


def _bool_index(indices: Any) -> bool:
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())


class _HostReads(TorchFunctionMode):
    """The host reads a CPU tensor dispatches nothing for; and where CPU-only checks must not count."""

    def __init__(self, owner: HostSyncCounter) -> None:
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in HOST_READS:
            self.owner.counts[f'Tensor.{func.__name__}'] += 1
        # one_hot with num_classes checks the class range with two `.item()`s on the CPU only (ATen's Onehot.cpp)
        cpu_only = (
            func is torch.nn.functional.one_hot and (args[1] if len(args) > 1 else kwargs.get('num_classes', -1)) != -1
        )
        self.owner.cpu_only_checks += cpu_only
        try:
            return func(*args, **kwargs)
        finally:
            self.owner.cpu_only_checks -= cpu_only


class HostSyncCounter(TorchDispatchMode):
    """`with HostSyncCounter() as c: step()` -> `c.syncs`, `c.uploads`, `c.counts` (per operator)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()
        self.sync_names: set[str] = set()
        self.cpu_only_checks = 0  # > 0 inside an operator whose reads run on the CPU only
        self._reads = _HostReads(self)

    def __enter__(self) -> HostSyncCounter:
        self._reads.__enter__()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self._reads.__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.cpu_only_checks:
            pass
        elif func in SYNC_OPS and not (func is _aten.repeat_interleave.Tensor and kwargs.get('output_size')):
            self._count(str(func), sync=True)
        elif func in MASK_INDEXING and _bool_index(args[1] if len(args) > 1 else kwargs.get('indices')):
            self._count(f'{func} (boolean mask)', sync=True)
        elif func in UPLOAD_OPS:
            self._count(str(func), sync=False)
        elif _upload(func, args, kwargs):
            self._count(UPLOAD, sync=False)
        return func(*args, **kwargs)

    def _count(self, name: str, sync: bool) -> None:
        self.counts[name] += 1
        if sync:
            self.sync_names.add(name)

    @property
    def syncs(self) -> int:
        """Host syncs: the sync operators' and the host reads' counts."""
        return sum(n for name, n in self.counts.items() if name in self.sync_names or name.startswith('Tensor.'))

    @property
    def uploads(self) -> int:
        """Uploads: tensors made from Python data and copies of CPU tensors to another device."""
        return sum(n for name, n in self.counts.items() if name in UPLOAD_NAMES)

    def summary(self) -> str:
        """'2 (aten._local_scalar_dense.default x2)' -- what synced (the uploads are in `counts`)."""
        what = [f'{name} x{n}' for name, n in sorted(self.counts.items()) if name not in UPLOAD_NAMES]
        return f'{self.syncs}' + (f' ({", ".join(what)})' if what else '')
