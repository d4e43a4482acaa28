"""Peak tensor memory of a piece of code, on any device, by tensor bookkeeping.

CUDA has allocator statistics (`torch.cuda.max_memory_allocated`); the CPU has none. This
tracker sees every operator call through a `TorchDispatchMode`, counts the storage of each new
(non-view) output tensor as allocated, and releases it when the last tensor using that storage
is freed. The peak of that running sum is the peak of tensor memory allocated inside the
context (not counting tensors that existed before it, e.g. parameters and the input).

It does not see scratch buffers internal to a kernel, and it slows execution down, so measure
memory and time in separate passes (`run_benchmark` does).
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class PeakMemoryTracker(TorchDispatchMode):
    """`with PeakMemoryTracker() as t: f()` -> `t.peak_bytes`, `t.current_bytes`."""

    def __init__(self) -> None:
        super().__init__()
        self._live: dict[int, list[int]] = {}  # storage id -> [nbytes, number of live tensors]
        self.current_bytes = 0
        self.peak_bytes = 0

    def _release(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current_bytes -= entry[0]
            del self._live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        # Outputs that alias an input (views, in-place ops) allocate nothing new.
        aliases = [r.alias_info is not None for r in func._schema.returns]
        is_alias = any(aliases)
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor) or t.device.type == 'meta':
                continue
            key = t.untyped_storage()._cdata
            entry = self._live.get(key)
            if entry is not None:
                entry[1] += 1
            elif is_alias:
                continue  # a view of memory that existed before the context
            else:
                nbytes = t.untyped_storage().nbytes()
                self._live[key] = [nbytes, 1]
                self.current_bytes += nbytes
                self.peak_bytes = max(self.peak_bytes, self.current_bytes)
            weakref.finalize(t, self._release, key)
        return out
