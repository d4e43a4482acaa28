# SR-ViT at the toy size (the toy configs of every task: 6 ViT-Ti blocks in units [2, 2, 1, 1], T=4, 24
# applications, trained from scratch); otherwise the dense recipes' srvit-s_deit.py.
_base_ = './srvit-s_deit.py'
backbone = dict(arch='tiny', depth=6, unit_sizes=(2, 2, 1, 1), init_cfg=None)
