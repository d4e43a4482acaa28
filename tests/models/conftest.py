import pytest
import torch
from timm.models.vision_transformer import VisionTransformer


@pytest.fixture(scope='session')
def deit():
    """A 12-block timm ViT (random weights: a stand-in for DeiT) and its state dict."""
    torch.manual_seed(0)
    vit = VisionTransformer(img_size=64, patch_size=16, embed_dim=32, depth=12, num_heads=2, num_classes=10).eval()
    return vit, vit.state_dict()
