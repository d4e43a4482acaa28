"""mmrecvit: recursive Vision Transformer backbones for mmdet and mmseg.

Importing the package applies the compatibility fixes (`mmrecvit.compat`) and registers every
backbone, neck and hook into the installed OpenMMLab registries (`mmrecvit.mm.registry`).
"""
from . import compat
from .mm import register_all
from .models import BACKBONES, NECKS

__version__ = '0.1.0'

compat.apply()
register_all()

__all__ = ['BACKBONES', 'NECKS', '__version__']
