"""`import mmrecvit.mm` registers into mmdet, mmseg and mmpretrain; the core needs none of them."""

import importlib
import inspect
import os.path as osp
import pkgutil
import re
import subprocess
import sys

import pytest
from helpers import REPO
from mmengine.hooks import Hook

import mmrecvit.mm
import mmrecvit.mm.hooks as hooks
from mmrecvit.mm.hooks import HOOK_CLASSES
from mmrecvit.mm.optim import OPTIM_WRAPPER_CONSTRUCTORS
from mmrecvit.models import BACKBONES, NECKS

SCOPES = ['mmdet', 'mmseg', 'mmpretrain']


@pytest.mark.parametrize('scope', SCOPES)
def test_every_backbone_neck_hook_and_constructor_is_registered(scope):
    registry = __import__(f'{scope}.registry', fromlist=['MODELS'])
    for name, cls in {**BACKBONES, **NECKS}.items():
        assert registry.MODELS.module_dict[name] is cls
    for name, cls in HOOK_CLASSES.items():
        assert registry.HOOKS.module_dict[name] is cls
    for name, cls in OPTIM_WRAPPER_CONSTRUCTORS.items():
        assert registry.OPTIM_WRAPPER_CONSTRUCTORS.module_dict[name] is cls


def test_register_all_is_idempotent():
    assert mmrecvit.mm.register_all() == SCOPES


def test_one_file_per_hook_each_registered_and_re_exported():
    """mmrecvit/mm/hooks/<snake_case>_hook.py defines exactly the hook of its name (as mmdet's engine/hooks/),
    HOOK_CLASSES (what `register_all` registers) holds each, and `mmrecvit.mm.hooks` re-exports every
    public name of every file."""
    files = [m.name for m in pkgutil.iter_modules(hooks.__path__)]
    assert files and all(name.endswith('_hook') for name in files), files
    defined = {}
    for name in files:
        module = importlib.import_module(f'{hooks.__name__}.{name}')
        own = {
            k: v
            for k, v in vars(module).items()
            if not k.startswith('_') and getattr(v, '__module__', None) == module.__name__
        }
        hook_classes = [v for v in own.values() if inspect.isclass(v) and issubclass(v, Hook)]
        assert len(hook_classes) == 1, (name, hook_classes)
        snake = re.sub(r'(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])', '_', hook_classes[0].__name__).lower()
        assert snake == name
        defined.update(own)
    assert set(HOOK_CLASSES.values()) == {v for v in defined.values() if inspect.isclass(v) and issubclass(v, Hook)}
    assert all(HOOK_CLASSES[cls.__name__] is cls for cls in HOOK_CLASSES.values())
    for k, v in defined.items():
        assert getattr(hooks, k) is v and k in hooks.__all__, k


def run_python(code, *args):
    return subprocess.run([sys.executable, '-c', code, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.subprocess
def test_core_imports_without_the_frameworks():
    code = (
        "import sys; sys.modules['mmdet'] = sys.modules['mmseg'] = sys.modules['mmpretrain'] = None\n"
        'import torch, mmrecvit.mm\n'
        'from mmrecvit.models import PlainViT\n'
        'assert mmrecvit.mm.register_all() == []\n'
        "print(PlainViT('tiny', depth=2)(torch.randn(1, 3, 32, 32))[0].shape)"
    )
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    assert 'torch.Size([1, 192, 2, 2])' in res.stdout


@pytest.mark.parametrize(
    'config, scope, built',
    [
        ('configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py', 'mmdet', 'PlainViT SimplePyramid'),
        ('configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py', 'mmseg', 'PlainViT SimplePyramid'),
        ('configs/cls/plainvit-ti_1xb32-200it_toy-cls.py', 'mmpretrain', 'PlainViT VisionTransformerClsHead'),
    ],
)
@pytest.mark.subprocess
def test_custom_imports_in_a_config_is_enough(config, scope, built):
    # A fresh interpreter that never imports mmrecvit itself: the config's custom_imports does it.
    code = (
        'from mmengine.config import Config\n'
        'from mmengine.registry import init_default_scope\n'
        f'from {scope}.registry import MODELS\n'
        f'cfg = Config.fromfile({config!r})\n'
        f'init_default_scope({scope!r})\n'
        'model = MODELS.build(cfg.model)\n'
        'after = model.neck if model.neck is not None else model.head\n'
        "after = after[0] if hasattr(after, '__getitem__') else after\n"
        'print(type(model.backbone).__name__, type(after).__name__)'
    )
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    assert built in res.stdout


@pytest.mark.subprocess
def test_the_old_spelling_still_registers_and_warns_once_naming_the_new(tmp_path):
    """Issue 47.1: `custom_imports=dict(imports=['mmrecvit'])` (configs written before `mmrecvit.mm`) builds as
    before, with one warning naming 'mmrecvit.mm'; the new spelling, or `import mmrecvit.mm` after mmengine, none."""
    base = osp.join(REPO, 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py')
    for spelling in ('mmrecvit', 'mmrecvit.mm'):
        (tmp_path / f'{spelling}.py').write_text(
            f'_base_ = [{base!r}]\ncustom_imports = dict(imports=[{spelling!r}], allow_failed_imports=False)\n'
        )
    code = (
        'import sys\n'
        'from mmengine.config import Config\n'
        'from mmengine.registry import init_default_scope\n'
        'from mmdet.registry import MODELS\n'
        'init_default_scope("mmdet")\n'
        'for _ in range(2):\n'
        '    print(type(MODELS.build(Config.fromfile(sys.argv[1]).model.backbone)).__name__)\n'
    )
    for spelling, said in (('mmrecvit', 1), ('mmrecvit.mm', 0)):
        res = run_python(code, str(tmp_path / f'{spelling}.py'))
        assert res.returncode == 0, res.stderr[-2000:]
        assert res.stdout.split() == ['PlainViT', 'PlainViT']
        warned = [line for line in res.stderr.splitlines() if 'old spelling' in line]
        assert len(warned) == said and all("use 'mmrecvit.mm'" in line for line in warned), res.stderr[-2000:]
    res = run_python('import mmengine, mmrecvit.mm.registry; from mmrecvit import models')
    assert res.returncode == 0 and 'old spelling' not in res.stderr, res.stderr[-2000:]
