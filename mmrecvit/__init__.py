"""mmrecvit: recursive Vision Transformer backbones in plain PyTorch, with thin adapters to timm, OpenMMLab and
detectron2.

`import mmrecvit` imports torch and timm, nothing else, and registers every backbone x size in timm's model
registry (`timm.create_model('srvit_small_patch16_224')`). Each framework is a package of its own, imported by
whoever uses it (docs/install.md):

* `mmrecvit.models`: the networks (torch + timm layers);
* `mmrecvit.mm`: OpenMMLab; importing it applies the compatibility fixes and registers into mmdet's, mmseg's and
  mmpretrain's registries: `custom_imports = dict(imports=['mmrecvit.mm'], allow_failed_imports=False)`;
* `mmrecvit.d2`: detectron2; `mmrecvit.timm`: the timm classifiers (registered here).

The spelling of earlier versions, `custom_imports = dict(imports=['mmrecvit'])`, still registers the OpenMMLab
side, with one warning naming `mmrecvit.mm`: `import mmrecvit` does so when mmengine is imported already (as
mmengine's config loader has) and the import names `mmrecvit` itself, not one of its packages
(`_imported_by_name`).
"""

import sys
import warnings

from .models import BACKBONES, NECKS
from .timm import register_timm_models
from .version import __version__

register_timm_models()


def _imported_by_name() -> bool:
    """Whether this import names `mmrecvit` itself, not a package of it (`import mmrecvit.mm` imports this one
    first): the import machinery's frames above this module name what is being imported. Their names are read
    because nothing else tells a package which of its children, if any, is on the way (written by hand)."""
    frame = sys._getframe(1).f_back  # above this module's own code
    while frame is not None and frame.f_code.co_filename.startswith('<frozen importlib._bootstrap'):
        name = frame.f_locals.get('name')
        if isinstance(name, str) and name.startswith(f'{__name__}.'):
            return False
        frame = frame.f_back
    return True


if 'mmengine' in sys.modules and _imported_by_name():
    warnings.warn(
        "mmrecvit: `custom_imports=dict(imports=['mmrecvit'])` (or `import mmrecvit`) registering into OpenMMLab is "
        "the old spelling: use 'mmrecvit.mm' (docs/install.md); registered for now",
        FutureWarning,
        stacklevel=2,
    )
    from . import mm  # noqa: F401  (the fixes and the registration)

__all__ = ['BACKBONES', 'NECKS', '__version__']
