"""Thin glue to mmdet and mmseg: registration, the training hook, distributed start-up.

Nothing here defines a network; `mmrecvit.models` does. See `registry.register_all`.
"""
from .registry import register_all

__all__ = ['register_all']
