"""Register our backbones, necks, hooks and optimizer-wrapper constructors into mmdet's, mmseg's and
mmpretrain's registries, and our conv-feature LayerNorm (`mmrecvit.mm.norm.LN2d`) into mmengine's root
registry beside mmcv's norms.

`custom_imports = dict(imports=['mmrecvit.mm'], allow_failed_imports=False)` in an mmdet, mmseg or
mmpretrain config runs `register_all()` (through `import mmrecvit.mm`), after which every backbone and
neck of ours is buildable by its `type` name under any of those default scopes (an mmpretrain
`ImageClassifier` takes a backbone with `out_type='cls_token'`). Frameworks that are not installed
are skipped, so the plain-PyTorch core stays usable without them.

A `type` that the registry searched does not hold (`type='SRVit'`) is one `UnknownTypeError` naming the
closest names it does hold (`_suggesting`); mmengine's own KeyError names none.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging

from ..models import NECKS, on_register
from ..models.checks import ArgumentError, closest
from . import model_index
from .compat import unusable

SCOPES = ('mmdet', 'mmseg', 'mmpretrain')


class _ToMMEngine(logging.Handler):
    """Hands a log record to mmengine's current logger."""

    def emit(self, record: logging.LogRecord) -> None:
        from mmengine.logging import print_log  # here, not at the top: see `register_all`

        print_log(self.format(record), logger='current', level=record.levelno)


def _forward_logs_to_mmengine() -> None:
    """Send the core's `logging.getLogger('mmrecvit')` records to mmengine's current logger (once)."""
    logger = logging.getLogger('mmrecvit')
    if not any(isinstance(h, _ToMMEngine) for h in logger.handlers):
        logger.addHandler(_ToMMEngine())
        logger.setLevel(logging.INFO)


def config_scope(cfg, what: str, error: type[Exception], hint: str = '') -> str:
    """The framework a config builds in, its `default_scope`; `error` naming `what`, the value and `SCOPES` (then
    `hint`) when it is none of them (the harness's config models and the dry run's recipes)."""
    scope = cfg.get('default_scope')
    if scope not in SCOPES:
        raise error(f'{what}: default_scope={scope!r}, allowed: {list(SCOPES)}{hint}')
    return scope


@functools.cache
def installed_scopes() -> tuple[str, ...]:
    """The frameworks of `SCOPES` that are installed (looked up once)."""
    return tuple(scope for scope in SCOPES if importlib.util.find_spec(scope) is not None)


def _put(registry, name: str, cls: type) -> None:
    """Register `cls` as `name` unless it already is (module_dict: `get()` would import all of mmdet.models)."""
    if registry.module_dict.get(name) is not cls:
        registry.register_module(name=name, module=cls)


class UnknownTypeError(ArgumentError, KeyError):
    """A config's `type` that its registry does not hold."""

    def __str__(self) -> str:
        return str(self.args[0])  # KeyError's own str() quotes the message


def _all_names(registry) -> list[str]:
    """The names `registry` resolves without a scope prefix: its own and its parents'."""
    names: list[str] = []
    while registry is not None:
        names += list(registry.module_dict)
        registry = registry.parent
    return names


def _suggesting(build_func):
    """`build_func` (a registry's), where a `type` not in the registry searched becomes one `UnknownTypeError`
    naming the closest names it holds (ours among them); every other error passes unchanged."""
    if getattr(build_func, 'suggests_closest', False):
        return build_func

    @functools.wraps(build_func)
    def build(cfg, *args, registry, **kwargs):
        try:
            return build_func(cfg, *args, registry=registry, **kwargs)
        except KeyError as e:
            name = cfg.get('type') if isinstance(cfg, dict) and not isinstance(e, UnknownTypeError) else None
            if not isinstance(name, str):
                raise
            with registry.switch_scope_and_registry(cfg.get('_scope_')) as searched:
                if searched.get(name) is not None:
                    raise  # the type exists: the KeyError is from inside it
                names = _all_names(searched)
                near = closest(name.split('.')[-1], names)
                ours = sorted(n for n, c in searched.module_dict.items() if c.__module__.startswith('mmrecvit'))
                hint = f'closest: {", ".join(map(repr, near))}' if near else f"mmrecvit's: {', '.join(ours)}"
                where = f'{searched.scope}::{searched.name}'
            raise UnknownTypeError(f'type={name!r} is not in the {where} registry; {hint}') from None

    build.suggests_closest = True
    return build


def register_all() -> list[str]:
    """Register into each installed framework; returns the scopes registered.

    Runs on `import mmrecvit.mm`, also for the plain-PyTorch core alone: what needs mmengine and mmcv
    (our hooks, the optimizer constructor, the data checks, mmengine's logger) is imported only once both are
    found; mmdet, mmseg and mmpretrain import both, so none of them runs without them.
    """
    if unusable('mmengine.runner', 'mmcv.transforms') is not None:  # e.g. the core alone
        return []
    scopes = list(installed_scopes())
    from mmengine.registry import MODELS

    from .data import CheckSegMap
    from .hooks import HOOK_CLASSES
    from .norm import NORM_LAYERS
    from .optim import OPTIM_WRAPPER_CONSTRUCTORS

    MODELS.build_func = _suggesting(MODELS.build_func)  # what the Runner builds its model with
    # norm_cfg types are looked up by mmcv's build_norm_layer from the current scope up to the root
    for name, cls in NORM_LAYERS.items():
        _put(MODELS, name, cls)

    for scope in scopes:
        registry = importlib.import_module(f'{scope}.registry')
        for reg, classes in (
            (registry.MODELS, NECKS),
            (registry.HOOKS, HOOK_CLASSES),
            (registry.OPTIM_WRAPPER_CONSTRUCTORS, OPTIM_WRAPPER_CONSTRUCTORS),
            (registry.TRANSFORMS, {'CheckSegMap': CheckSegMap}),
        ):
            for name, cls in classes.items():
                _put(reg, name, cls)
            reg.build_func = _suggesting(reg.build_func)
    if 'mmseg' in scopes:  # tools/test.py --show-dir, and the IoU table of the classes in use (logs.py)
        from .metrics import IoUMetricInUse
        from .visualization import SegShowDirVisualizer

        mmseg = importlib.import_module('mmseg.registry')
        _put(mmseg.VISUALIZERS, 'SegShowDirVisualizer', SegShowDirVisualizer)
        _put(mmseg.METRICS, 'IoUMetricInUse', IoUMetricInUse)
    on_register(_register_backbone)  # every backbone, also one registered later (`models.register_backbone`)
    _forward_logs_to_mmengine()
    model_index.install()  # DetInferencer(model=<our recipe name>) (model_index.py)
    return scopes


def _register_backbone(name: str, cls: type) -> None:
    """A backbone into every installed framework's MODELS registry."""
    for scope in installed_scopes():
        _put(importlib.import_module(f'{scope}.registry').MODELS, name, cls)
