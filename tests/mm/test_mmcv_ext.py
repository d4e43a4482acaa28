"""How mmcv-lite gets its ops (mmrecvit/mm/mmcv_ext.py): the import hook lets `mmcv._ext` resolve to the
torchvision table only where no compiled `mmcv._ext` is found (a full mmcv is used as it is), the module looks
like the compiled one to mmcv and mmengine, and an op the table lacks is one error naming it and the switch."""

import importlib.metadata
import inspect
import os
import subprocess
import sys
import types

import pytest
import torch
from helpers import compiled_mmcv_ext

import _mmrecvit_import_hook as import_hook
import mmrecvit.mm  # noqa: F401  (first: with mmcv-lite it provides mmcv._ext)
from mmrecvit.mm import mmcv_ext
from mmrecvit.mm.mmcv_ext import MissingMMCVOpError, MMCVExtFinder


@pytest.fixture
def table():
    module = types.ModuleType('mmcv._ext')
    MMCVExtFinder().exec_module(module)
    return module


def test_the_table_passes_mmcvs_import_checks_and_hides_private_names(table):
    from mmcv.utils import ext_loader

    assert hasattr(table, 'deform_conv_forward') and callable(table.roi_align_forward)  # load_ext's hasattr check
    for name in ('__path__', '__file__', '__wrapped__', '_private'):  # what inspect, pickle and copy probe
        assert not hasattr(table, name), name
    assert dict(inspect.getmembers(table))['nms'] is mmcv_ext.nms
    assert ext_loader.check_ops_exist()  # mmcv's own "are the ops there" (pkgutil), with either backend


def test_the_finder_answers_mmcv_ext_only_and_the_hook_asks_it_first_on_the_meta_path():
    finder = MMCVExtFinder()
    assert finder.find_spec('mmcv.ops') is None and finder.find_spec('mmcv_ext') is None
    spec = finder.find_spec('mmcv._ext')
    assert spec.name == 'mmcv._ext' and spec.loader is finder
    import_hook.install()
    hooks = [f for f in sys.meta_path if getattr(f, 'mmrecvit_import_hook', False)]
    assert len(hooks) == 1  # once
    python_finders = [
        i for i, f in enumerate(sys.meta_path) if getattr(f, '__module__', '').startswith('_frozen_importlib')
    ]
    assert sys.meta_path.index(hooks[0]) < min(
        python_finders
    )  # asked before Python's own finders (pytest's may precede)
    assert hooks[0].find_spec('mmcv.ops') is None and hooks[0].find_spec('mmrecvit') is None
    import mmcv

    spec = hooks[0].find_spec('mmcv._ext', mmcv.__path__)
    if compiled_installed():
        assert spec is None  # Python's path finder then finds the compiled module
    else:
        assert isinstance(spec.loader, MMCVExtFinder) and hooks[0].table is mmcv_ext  # one table, not a copy


def compiled_installed() -> bool:
    return not any(d.metadata['Name'] == 'mmcv-lite' for d in importlib.metadata.distributions())


@pytest.mark.subprocess
@pytest.mark.parametrize('hook', ['import', 'pth'])
def test_mmcv_ext_is_the_table_only_without_compiled_ops(tmp_path, hook):
    """A fresh interpreter as installed here, then with a compiled `_ext` on mmcv's path (the cached wheel's,
    as a full mmcv has it): the compiled one is found first, and used; with the import hook installed by
    `import mmrecvit.mm` first, or by the `.pth` at start (mmdet then imported before mmrecvit)."""
    site_dir = ''
    if hook == 'pth':
        site_dir = str(tmp_path / 'site')
        os.makedirs(site_dir)
        import_hook.write_pth(site_dir)
    check = (
        'import site, sys\n'
        'if sys.argv[1]:\n'
        '    site.addsitedir(sys.argv[1])\n'  # the `.pth`, as at interpreter start
        'import mmcv\n'
        'mmcv.__path__[:0] = sys.argv[2:]\n'  # where a full mmcv has it, before anything imports mmcv.ops
        'if not sys.argv[1]:\n'
        '    import mmrecvit.mm\n'
        'from mmengine.utils.dl_utils import mmcv_full_available\n'
        'import mmdet.models, mmseg.models, mmcv._ext as ext\n'
        'from mmcv.ops import RoIAlign, batched_nms\n'
        'from mmrecvit.mm.mmcv_ext import backend, MMCVExtFinder\n'
        'table = isinstance(ext.__spec__.loader, MMCVExtFinder)\n'
        'print(backend(), table, mmcv_full_available(), ext.__file__.rsplit(".", 1)[-1])\n'
    )
    as_installed = subprocess.run([sys.executable, '-c', check, site_dir], capture_output=True, text=True, timeout=300)
    assert as_installed.returncode == 0, as_installed.stderr
    assert as_installed.stdout.split() == (
        ['compiled', 'False', 'True', 'so'] if compiled_installed() else ['torchvision', 'True', 'True', 'py']
    )
    path = compiled_mmcv_ext(tmp_path)
    if path is None:
        pytest.skip('no compiled mmcv 2.1.0 wheel to put on the path (set MMRECVIT_WHEEL_DIR, as .ci/run does)')
    with_compiled = subprocess.run(
        [sys.executable, '-c', check, site_dir, os.path.dirname(path)], capture_output=True, text=True, timeout=300
    )
    assert with_compiled.returncode == 0, with_compiled.stderr
    assert with_compiled.stdout.split() == ['compiled', 'False', 'True', 'so']


@pytest.mark.parametrize(
    'call, op',
    [
        (lambda ops: ops.soft_nms(torch.rand(4, 4), torch.rand(4), 0.5), 'softnms'),
        (lambda ops: ops.RoIAlign(7, 0.25, pool_mode='max')(torch.rand(1, 2, 8, 8), torch.zeros(1, 5)), 'max'),
        (lambda ops: ops.DeformConv2d(2, 2, 3)(torch.rand(1, 2, 8, 8), torch.zeros(1, 18, 6, 6)), 'deform_conv'),
    ],
)
def test_an_op_the_table_lacks_is_one_error_naming_it_and_the_switch(monkeypatch, table, call, op):
    import mmcv.ops

    for module in ('mmcv.ops.nms', 'mmcv.ops.roi_align', 'mmcv.ops.deform_conv'):
        monkeypatch.setattr(sys.modules[module], 'ext_module', table)
    with pytest.raises(MissingMMCVOpError) as error:
        call(mmcv.ops)
    (line,) = str(error.value).splitlines()
    assert op in line and 'make setup MMCV=full' in line and 'roi_align_forward' in line  # what the table has


@pytest.mark.parametrize('warn_only', [False, True])
def test_roi_align_backward_on_cuda_honours_torchs_determinism_check(warn_only):
    """Issue 48.7: torchvision's CUDA RoIAlign backward accumulates with atomicAdd; called by its op it would skip the
    check torch's own kernels make, so the table makes it (on a CUDA tensor; the CPU kernel is deterministic)."""
    cuda_grad, cpu_grad = types.SimpleNamespace(is_cuda=True), torch.zeros(1)
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        mmcv_ext._alert_not_deterministic(cuda_grad, 'roi_align_backward')  # off: nothing
        torch.use_deterministic_algorithms(True, warn_only=warn_only)
        mmcv_ext._alert_not_deterministic(cpu_grad, 'roi_align_backward')
        expect = pytest.warns(UserWarning) if warn_only else pytest.raises(RuntimeError)
        with expect as caught:
            mmcv_ext._alert_not_deterministic(cuda_grad, 'roi_align_backward')
        assert 'roi_align_backward' in str(caught.list[0].message if warn_only else caught.value)
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def test_roi_align_keeps_fp16_on_cuda_and_upcasts_where_the_kernel_is_not_exact():
    """Issue 48.7: no fp32 copy of an FPN level where the kernel takes fp16 at its accuracy (CUDA); bf16 everywhere
    and fp16 on the CPU (its kernel accumulates in half) are computed in fp32. NMS's boxes: fp32."""
    on = lambda device, dtype: types.SimpleNamespace(dtype=dtype, device=torch.device(device))  # noqa: E731
    decide = mmcv_ext._compute_dtype
    assert decide(on('cuda', torch.float16), mmcv_ext.ROI_ALIGN_DTYPES) == torch.float16
    for device, dtype in (('cuda', torch.bfloat16), ('cpu', torch.float16), ('cpu', torch.bfloat16)):
        assert decide(on(device, dtype), mmcv_ext.ROI_ALIGN_DTYPES) == torch.float32
    assert decide(on('cuda', torch.float16), mmcv_ext.NMS_DTYPES) == torch.float32
    assert decide(on('cpu', torch.float64), mmcv_ext.ROI_ALIGN_DTYPES) == torch.float64
