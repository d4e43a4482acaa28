"""Register our backbones, necks, hooks and optimizer-wrapper constructors into mmdet's, mmseg's and
mmpretrain's registries, and our conv-feature LayerNorm (`mmrecvit.mm.norm.LN2d`) into mmengine's root
registry beside mmcv's norms.

`custom_imports = dict(imports=['mmrecvit'], allow_failed_imports=False)` in an mmdet, mmseg or
mmpretrain config runs `register_all()` (through `import mmrecvit`), after which every backbone and
neck of ours is buildable by its `type` name under any of those default scopes (an mmpretrain
`ImageClassifier` takes a backbone with `out_type='cls_token'`). Frameworks that are not installed
are skipped, so the plain-PyTorch core stays usable without them.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging

from ..compat import unusable
from ..models import NECKS, on_register

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


@functools.cache
def installed_scopes() -> tuple[str, ...]:
    """The frameworks of `SCOPES` that are installed (looked up once)."""
    return tuple(scope for scope in SCOPES if importlib.util.find_spec(scope) is not None)


def _put(registry, name: str, cls: type) -> None:
    """Register `cls` as `name` unless it already is (module_dict: `get()` would import all of mmdet.models)."""
    if registry.module_dict.get(name) is not cls:
        registry.register_module(name=name, module=cls)


def register_all() -> list[str]:
    """Register into each installed framework; returns the scopes registered.

    Runs on every `import mmrecvit`, also for the plain-PyTorch core alone: what needs mmengine and mmcv
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
    on_register(_register_backbone)  # every backbone, also one registered later (`models.register_backbone`)
    _forward_logs_to_mmengine()
    return scopes


def _register_backbone(name: str, cls: type) -> None:
    """A backbone into every installed framework's MODELS registry."""
    for scope in installed_scopes():
        _put(importlib.import_module(f'{scope}.registry').MODELS, name, cls)
