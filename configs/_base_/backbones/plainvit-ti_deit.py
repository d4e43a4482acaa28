# PlainViT-Ti from DeiT-Ti (5.7 M parameters, 72.2 % top-1): the iso-parameter reference of the shared-weight methods
# (NaiveRecursiveViT, reViT, Edge-RecViT, MoR-ViT: 5.7-6.0 M at S width) in the references family (docs/comparison.md).
_base_ = './plainvit-s_deit.py'
backbone = dict(arch='tiny', init_cfg=dict(checkpoint='checkpoints/deit_tiny_patch16_224-a1311bcf.pth'))
