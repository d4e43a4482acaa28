"""Thin glue to mmdet and mmseg: registration, the training hook, distributed start-up, the
command line of tools/train.py and tools/test.py (`cli`).

Nothing here defines a network; `mmrecvit.models` does. See `registry.register_all`.
"""

from .registry import register_all

__all__ = ['register_all']
