# NaiveRecursiveViT at the toy size (the toy configs of every task: ViT-Ti, 2 unique blocks for 6 layers, trained from
# scratch); otherwise the dense recipes' naiverecvit-s_in1k.py.
_base_ = './naiverecvit-s_in1k.py'
backbone = dict(arch='tiny', depth=6, num_blocks=2, init_cfg=None)
backbone_recipe = dict(paper_start=None)  # trained from scratch: no paper start
