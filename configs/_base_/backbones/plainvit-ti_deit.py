# PlainViT-Ti from DeiT-Ti (5.7 M parameters, 72.2 % top-1): the iso-parameter reference of the shared-weight methods
# (NaiveRecursiveViT, reViT, Edge-RecViT, MoR-ViT: 5.7-6.0 M at S width) in the references family (docs/comparison.md).
# `references`: its recipe data for each task, its differences from PlainViT-S's recipe in the references family
# (widths.reference; docs/comparison.md); a recipe of it takes its task's out, `_base_.pop('references')[task]`.
_base_ = ['./plainvit-s_deit.py', '../widths.py']
backbone = dict(arch='tiny', init_cfg=dict(checkpoint='checkpoints/deit_tiny_patch16_224-a1311bcf.pth'))
references = _base_.pop('widths').references(_base_, 'ti')
