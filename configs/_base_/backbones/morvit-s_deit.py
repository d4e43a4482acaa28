# MoR-ViT-S as the COCO / ADE20K recipes use it: from DeiT-S, first/last <- blocks 0/11, the shared block <- the mean of
# the tied blocks (shared_init='average'); gates open (router_init='open') at scale router_alpha=1.0, so a recursion
# applies the whole block (MoR's from-scratch alpha 0.1 would cap every update at a tenth).
_base_ = './morvit-s.py'
backbone = dict(
    shared_init='average',
    router_init='open',
    router_alpha=1.0,
    init_cfg=dict(type='Pretrained', checkpoint='checkpoints/deit_small_patch16_224-cd65a155.pth'),
)
backbone_recipe = dict(
    intended={
        'model.backbone.router_alpha': "MoR-ViT's router scale",
        'model.backbone.router_init': 'how the gates start from a DeiT checkpoint (docs/methods/mor_vit.md)',
        'model.backbone.shared_init': 'which DeiT blocks start the shared one (docs/methods/mor_vit.md)',
    }
)
