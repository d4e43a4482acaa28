"""The networks, in plain PyTorch (torch + timm layers; no mmdet/mmseg/detectron2 imports).

Each method is one file (vit.py: the two baselines; srvit.py, revit.py, edge_recvit.py, mor_vit.py) on the
shared `backbone.ViTBackbone`; `register_backbone` (registry.py) hands a new one to every framework adapter.
"""

from .backbone import ViTBackbone
from .flops import BlockWork, OpWork
from .pyramid import SimplePyramid
from .registry import BACKBONES, on_register, register_backbone
from .stats import FeatureMaps, ForwardStats

# The import order is the registration order, the order the docs list the methods in.
# isort: off
from .vit import NaiveRecursiveViT, PlainViT
from .srvit import SRViT
from .revit import ReViT
from .edge_recvit import EdgeRecViT
from .mor_vit import MoRViT
# isort: on

NECKS = {'SimplePyramid': SimplePyramid}

__all__ = [
    'BACKBONES',
    'NECKS',
    'BlockWork',
    'EdgeRecViT',
    'FeatureMaps',
    'ForwardStats',
    'MoRViT',
    'NaiveRecursiveViT',
    'OpWork',
    'PlainViT',
    'ReViT',
    'SRViT',
    'SimplePyramid',
    'ViTBackbone',
    'on_register',
    'register_backbone',
]
