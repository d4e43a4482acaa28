"""Tiny constructor arguments for every registered backbone, used by the shared test suite.

Each entry builds a model small enough for fast CPU tests. A new backbone adds one line here
(and `tests/test_backbones.py` then checks shapes, gradients, state-dict round trip,
determinism and argument errors for it).
"""
TINY = dict(embed_dim=32, num_heads=2, img_size=64)

BACKBONE_CASES = {
    'PlainViT': dict(arch='tiny', depth=4, **TINY),
    'NaiveRecursiveViT': dict(arch='tiny', depth=6, num_blocks=2, **TINY),
    'SRViT': dict(arch='tiny', num_blocks=6, num_recursions=[2, 3, 2, 1], **TINY),
    'ReViT': dict(arch='tiny', depth=4, num_experts=3, **TINY),
    'EdgeRecViT': dict(arch='tiny', depth=5, **TINY),
    'MoRViT': dict(arch='tiny', num_recursions=3, **TINY),
}


def masked_attention(block, x, attn_mask):
    """Reference: a block's attention over (B, N, D) tokens written out with an attention mask
    (B, 1, N, N) bool, True = may attend; the subset-attention paths must equal it."""
    import torch.nn.functional as F

    B, N, D = x.shape
    H = block.attn.num_heads
    q, k, v = block.attn.qkv(block.norm1(x)).reshape(B, N, 3, H, D // H).permute(2, 0, 3, 1, 4).unbind(0)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    return block.attn.proj(out.transpose(1, 2).reshape(B, N, D))
