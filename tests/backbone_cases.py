"""Tiny constructor arguments for every registered backbone, used by the shared test suite.

Each entry builds a model small enough for fast CPU tests. A new backbone adds one line here
(and `tests/test_backbones.py` then checks shapes, gradients, state-dict round trip,
determinism and argument errors for it).
"""
TINY = dict(embed_dim=32, num_heads=2, img_size=64)

BACKBONE_CASES = {
    'PlainViT': dict(arch='tiny', depth=4, **TINY),
    'NaiveRecursiveViT': dict(arch='tiny', depth=6, num_unique_blocks=2, **TINY),
    'SRViT': dict(arch='tiny', depth=6, num_steps=[2, 3, 2, 1], **TINY),
    'ReViT': dict(arch='tiny', depth=4, num_experts=3, **TINY),
    'EdgeRecViT': dict(arch='tiny', depth=5, **TINY),
    'MoRViT': dict(arch='tiny', num_recursions=3, **TINY),
}
