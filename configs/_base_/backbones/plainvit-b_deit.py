# PlainViT-B as the COCO / ADE20K recipes use it: plainvit-s_deit.py at ViT-B width, from DeiT-B.
# `references`: its recipe data for each task, its differences from PlainViT-S's recipe in the references family
# (widths.reference; docs/comparison.md); a recipe of it takes its task's out, `_base_.pop('references')[task]`.
_base_ = ['./plainvit-s_deit.py', '../widths.py']
backbone = dict(arch='base', init_cfg=dict(checkpoint='checkpoints/deit_base_patch16_224-b5f2ef4d.pth'))
references = _base_.pop('widths').references(_base_, 'b')
