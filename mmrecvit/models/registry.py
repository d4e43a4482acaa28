"""The backbones of mmrecvit, and how one reaches every framework: `register_backbone`.

    @register_backbone('halvesvit')       # the short name (timm's `halvesvit_small_patch16_224`)
    class HalvesViT(ViTBackbone): ...

puts the class into `BACKBONES` under its class name and hands it to every adapter that listens
(`on_register`): the mm adapter registers it into mmdet's, mmseg's and mmpretrain's registries, the
detectron2 adapter makes it a `Backbone` of the same name, the timm adapter a classifier per size.
A listener also receives the backbones registered before it, so the import order does not matter.
(Plain callbacks, written by hand: none of the three frameworks' registries can notify the others.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Every backbone, in registration order (the docs' order); adapters and tests iterate over it.
BACKBONES: dict[str, type] = {}
_LISTENERS: list[Callable[[str, type], None]] = []


def register_backbone(short_name: str | Callable | None = None) -> Any:
    """Class decorator: register a `ViTBackbone` subclass (`@register_backbone` or `@register_backbone('name')`).

    short_name: the lower-case name of the method in file and model names (configs, timm); default the class
    name in lower case. Registering another class under a taken name is an error naming both.
    """

    def register(cls: type, name: str | None = None) -> type:
        cls.short_name = name or cls.__name__.lower()
        known = BACKBONES.get(cls.__name__)
        if known is not None and known is not cls:
            raise ValueError(
                f'a backbone named {cls.__name__!r} is already registered ({known.__module__}); rename the class'
            )
        if known is None:
            BACKBONES[cls.__name__] = cls
            for listener in _LISTENERS:
                listener(cls.__name__, cls)
        return cls

    if isinstance(short_name, type):  # used bare: @register_backbone
        return register(short_name)
    return lambda cls: register(cls, short_name)


def on_register(listener: Callable[[str, type], None]) -> None:
    """Call `listener(name, cls)` for every backbone registered so far and for each registered later (once)."""
    if listener in _LISTENERS:
        return
    _LISTENERS.append(listener)
    for name, cls in list(BACKBONES.items()):
        listener(name, cls)
