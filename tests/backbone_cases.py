"""Tiny constructor arguments for every registered backbone, and references several model tests share.

Each entry builds a model small enough for fast CPU tests. A new backbone adds one line here
(and `tests/models/test_common.py` then checks shapes, gradients, state-dict round trip,
determinism and argument errors for it).
"""

TINY = dict(embed_dim=32, num_heads=2, img_size=64)

BACKBONE_CASES = {
    'PlainViT': dict(arch='tiny', depth=4, **TINY),
    'NaiveRecursiveViT': dict(arch='tiny', depth=6, num_blocks=2, **TINY),
    'SRViT': dict(arch='tiny', depth=6, num_recursions=[2, 3, 2, 1], **TINY),
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


def tiny_backbone(name, **kwargs):
    """The registered backbone `name` at its tiny size (`BACKBONE_CASES`), `kwargs` on top, seeded."""
    import torch

    from mmrecvit.models import BACKBONES

    torch.manual_seed(0)
    return BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs})


def distance_to_deit(model, vit, sd):
    """(mean per-token cosine, mean per-token relative L2 error) of `model`'s last map, loaded from the
    timm ViT state dict `sd` (the `deit` fixture of tests/models/conftest.py), to that ViT's last block."""
    import torch
    import torch.nn.functional as F

    from mmrecvit.models.checkpoint import load_state_dict_into

    load_state_dict_into(model, sd, 'deit')
    x = torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = model.eval()(x)[-1].flatten(2)  # (B, D, h*w)
        ref = vit.forward_intermediates(x, indices=[11], intermediates_only=True)[-1].flatten(2)
    cosine = F.cosine_similarity(ours, ref, dim=1).mean()
    return float(cosine), float(((ours - ref).norm(dim=1) / ref.norm(dim=1)).mean())


def tiny_revit(**kwargs):
    """A 6-step reViT with 3 experts at the tiny width (reViT's own tests and the fold converter's)."""
    from mmrecvit.models import ReViT

    return ReViT(**{'arch': 'tiny', **TINY, 'depth': 6, 'num_experts': 3, **kwargs})


def program_router(model, seed=3):
    """Non-uniform gates that change with depth (a trained router instead of the zero init)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.router.fc2.weight.copy_(torch.randn(model.router.fc2.weight.shape, generator=gen))
        model.router.fc2.bias.copy_(torch.randn(model.router.fc2.bias.shape, generator=gen))
    return model


def traced_with_stats(model, x):
    """(mmengine's traced FLOPs of `model(x)`, the `ForwardStats` of that same traced forward): the statistics
    travel with the forward's result, read here by a forward hook while mmengine traces."""
    from mmrecvit.mm.complexity import traced_flops

    seen = []
    handle = model.register_forward_hook(lambda module, args, out: seen.append(out.stats))
    try:
        traced = traced_flops(model, (x,))
    finally:
        handle.remove()
    return traced, seen[-1]


def token_states(model, images, layers, **kwargs):
    """(the states (B, N, D) of `layers`, prefix tokens included, in layer order; the forward's statistics):
    `forward_intermediates` in 'NLC' with the prefix tokens put back in front."""
    import torch

    states, stats = model.forward_intermediates(
        images,
        list(layers),
        output_fmt='NLC',
        intermediates_only=True,
        return_prefix_tokens=True,
        return_stats=True,
        **kwargs,
    )
    return [torch.cat([prefix, patches], 1) for patches, prefix in states], stats
