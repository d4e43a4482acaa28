# reViT at the toy size (the toy configs of every task: one ViT-Ti block applied 6 times, 4 experts, trained from
# scratch); otherwise the dense recipes' revit-s_in1k.py.
_base_ = './revit-s_in1k.py'
backbone = dict(arch='tiny', depth=6, init_cfg=None)
backbone_recipe = dict(paper_start=None)  # trained from scratch: no paper start
