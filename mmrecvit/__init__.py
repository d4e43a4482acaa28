"""mmrecvit: recursive Vision Transformer backbones for mmdet and mmseg.

Importing the package applies the compatibility fixes (`mmrecvit.compat`), registers every
backbone, neck and hook into the installed OpenMMLab registries (`mmrecvit.mm.registry`) and every
backbone as a classifier into timm's model registry (`mmrecvit.timm`).
"""

from . import compat
from .mm import register_all
from .models import BACKBONES, NECKS
from .timm import register_timm_models

__version__ = '0.1.0'

compat.apply()
register_all()
register_timm_models()

__all__ = ['BACKBONES', 'NECKS', '__version__']
