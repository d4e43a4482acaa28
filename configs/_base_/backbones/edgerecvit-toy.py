# Edge-RecViT at the toy size (the toy configs of every task: ViT-Ti head + shared x4 + tail, 6 layers, the shared
# block from checkpoint block 3, trained from scratch); otherwise the dense recipes' edgerecvit-s_in1k.py.
_base_ = './edgerecvit-s_in1k.py'
backbone = dict(arch='tiny', depth=6, shared_init_block=3, init_cfg=None)
