# Edge-RecViT at the toy size (the toy configs of every task: ViT-Ti head + shared x4 + tail, 6 layers, the shared
# block from checkpoint block 3, trained from scratch); otherwise the dense recipes' edgerecvit-s_in1k.py.
_base_ = './edgerecvit-s_in1k.py'
backbone = dict(arch='tiny', depth=6, shared_init_block=3, init_cfg=None)
temperature_schedule = dict(start=1.0)  # from scratch: its ranker's temperature annealed from 1.0
backbone_recipe = dict(paper_start=None)
