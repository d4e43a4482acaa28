# PlainViT at the toy size (the toy configs of every task: ViT-Ti, 6 blocks, trained from scratch); otherwise the
# dense recipes' plainvit-s_deit.py.
_base_ = './plainvit-s_deit.py'
backbone = dict(arch='tiny', depth=6, init_cfg=None)
backbone_recipe = dict(paper_start=None)  # trained from scratch: no paper start
