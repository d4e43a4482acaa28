"""Thin glue to OpenMMLab (mmdet, mmseg, mmpretrain): importing this package applies the compatibility fixes
(`compat`) and registers every backbone, neck, hook and optimizer-wrapper constructor into the installed
frameworks' registries (`registry.register_all`), as a config's
`custom_imports = dict(imports=['mmrecvit.mm'], allow_failed_imports=False)` does. Frameworks that are not
installed are skipped.

Also here: the training hooks, distributed start-up, the command line of tools/train.py and tools/test.py
(`cli`), mmcv-lite's ops (`mmcv_ext`). Nothing here defines a network; `mmrecvit.models` does.
"""

from . import compat, mmcv_ext
from .registry import register_all

compat.apply()
register_all()

__all__ = ['compat', 'mmcv_ext', 'register_all']
