"""The networks, in plain PyTorch (torch + timm layers; no mmdet/mmseg imports)."""
from .edge_recvit import EdgeRecViT
from .flops import BlockWork, OpWork
from .mor_vit import MoRViT
from .pyramid import SimplePyramid
from .revit import ReViT
from .srvit import SRViT
from .stats import ForwardStats
from .vit import NaiveRecursiveViT, PlainViT, ViTBackbone

# Every backbone, in the order the docs list them; registration and tests iterate over this.
BACKBONES = {
    'PlainViT': PlainViT,
    'NaiveRecursiveViT': NaiveRecursiveViT,
    'SRViT': SRViT,
    'ReViT': ReViT,
    'EdgeRecViT': EdgeRecViT,
    'MoRViT': MoRViT,
}
NECKS = {'SimplePyramid': SimplePyramid}

__all__ = ['BACKBONES', 'NECKS', 'BlockWork', 'ForwardStats', 'NaiveRecursiveViT', 'OpWork', 'PlainViT', 'ReViT',
           'SRViT', 'SimplePyramid', 'ViTBackbone', 'EdgeRecViT', 'MoRViT']
