# SR-ViT at the toy size (the toy configs of every task: 6 ViT-Ti blocks in units [2, 2, 1, 1], T=4, 24
# applications, trained from scratch: no paper start); otherwise the dense recipes' srvit-s_in1k.py.
_base_ = './srvit-s_in1k.py'
backbone = dict(arch='tiny', depth=6, unit_sizes=(2, 2, 1, 1), init_cfg=None)
backbone_recipe = dict(paper_start=None)
