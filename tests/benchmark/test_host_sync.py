"""`HostSyncCounter` (the GPU check's sync count on the CPU): what would make the host wait for a CUDA stream is
counted, what would not is not."""

import pytest
import torch
import torch.nn.functional as F

from mmrecvit.benchmark.host_sync import HostSyncCounter

x = torch.arange(12.0).reshape(3, 4) - 5


@pytest.mark.parametrize(
    'what, fn, syncs',
    [
        ('item', lambda: x.sum().item(), 1),
        ('bool', lambda: bool(x.sum() > 0), 1),
        ('int', lambda: int(x.argmax()), 1),
        ('tolist', lambda: x.tolist(), 1),
        ('cpu', lambda: x.cpu(), 1),
        ('nonzero', lambda: x.nonzero(), 1),
        ('boolean mask', lambda: x[x > 0], 1),
        ('boolean mask write', lambda: x.clone().__setitem__(x > 0, 0.0), 1),
        ('repeat_interleave', lambda: torch.repeat_interleave(torch.tensor([1, 2])), 1),
        ('repeat_interleave, output_size', lambda: torch.repeat_interleave(torch.tensor([1, 2]), output_size=3), 0),
        ('elementwise', lambda: (x * 2).softmax(-1).sum(), 0),
        ('integer index', lambda: x[torch.tensor([0, 2])], 0),
        ('one_hot with num_classes', lambda: F.one_hot(torch.tensor([0, 3]), 4), 0),  # CUDA checks on the device
        ('backward', lambda: (x.clone().requires_grad_() ** 2).sum().backward(), 0),
    ],
)
def test_counts_what_would_sync_on_a_gpu(what, fn, syncs):
    with HostSyncCounter() as counter:
        fn()
    assert counter.syncs == syncs, counter.counts


def test_uploads_are_counted_apart_and_named():
    with HostSyncCounter() as counter:
        torch.tensor([1.0, 2.0]).sum().item()
    assert (counter.syncs, counter.uploads) == (1, 1)
    assert counter.summary() == '1 (aten._local_scalar_dense.default x1)'


@pytest.mark.parametrize(
    'what, fn, uploads',
    [
        ('torch.tensor', lambda: torch.tensor([1.0, 2.0]), 1),
        ('to another device', lambda: x.to('meta'), 1),  # a CPU-only run's stand-in for .cuda()
        ('copy_ into another device', lambda: torch.empty(3, 4, device='meta').copy_(x), 1),
        ('arange on the device', lambda: torch.arange(4, device='meta') / 3, 0),
        ('to another dtype', lambda: x.to(torch.float64), 0),
        ('within the device', lambda: torch.empty(3, 4).copy_(x), 0),
    ],
)
def test_counts_host_to_device_copies_as_uploads(what, fn, uploads):
    """Uploads (issue 48.2): what a GPU run copies from pageable host memory, with a stream sync."""
    with HostSyncCounter() as counter:
        fn()
    assert (counter.uploads, counter.syncs) == (uploads, 0), counter.counts
