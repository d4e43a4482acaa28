"""The networks, in plain PyTorch (torch + timm layers; no mmdet/mmseg imports)."""
from .pyramid import SimplePyramid
from .srvit import SRViT
from .stats import ForwardStats, StepWork
from .vit import NaiveRecursiveViT, PlainViT, ViTBackbone

# Every backbone, in the order the docs list them; registration and tests iterate over this.
BACKBONES = {
    'PlainViT': PlainViT,
    'NaiveRecursiveViT': NaiveRecursiveViT,
    'SRViT': SRViT,
}
NECKS = {'SimplePyramid': SimplePyramid}

__all__ = ['BACKBONES', 'NECKS', 'ForwardStats', 'NaiveRecursiveViT', 'PlainViT', 'SRViT', 'SimplePyramid',
           'StepWork', 'ViTBackbone']
