"""Thin glue to OpenMMLab (mmdet, mmseg, mmpretrain): importing this package applies the compatibility fixes
(`compat`) and registers every backbone, neck, hook and optimizer-wrapper constructor into the installed
frameworks' registries (`registry.register_all`), as a config's
`custom_imports = dict(imports=['mmrecvit.mm'], allow_failed_imports=False)` does. Frameworks that are not
installed are skipped.

Also here: the training hooks, distributed start-up, the command line of tools/train.py and tools/test.py
(`cli`), mmcv-lite's ops (`mmcv_ext`, found by the import hook of `_mmrecvit_import_hook`). Nothing here
defines a network; `mmrecvit.models` does.
"""

import _mmrecvit_import_hook

from . import compat
from .registry import register_all

_mmrecvit_import_hook.adopt_table()  # first: the ops table the import hook loaded, if any, is `mmcv_ext`
compat.apply()
register_all()

__all__ = ['compat', 'register_all']
