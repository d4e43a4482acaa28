"""Datasets shipped with mmrecvit: the embedded toy COCO / ADE20K / classification generator (`toy`), whose names
this package hands on (`toy.__all__` is the one list of them)."""

from . import toy
from .toy import *  # noqa: F403

__all__ = list(toy.__all__)
