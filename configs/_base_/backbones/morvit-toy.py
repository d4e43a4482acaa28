# MoR-ViT at the toy size (the toy configs of every task: ViT-Ti first block, shared x4, last: 6 layers, trained from
# scratch); otherwise the dense recipes' morvit-s_in1k.py, but for the gate scale: router_alpha=1.0, with which the
# toys' figures were measured (docs/compute.md, docs/demo.md; MoR's from-scratch 0.1 is one --cfg-options away).
_base_ = './morvit-s_in1k.py'
backbone = dict(arch='tiny', depth=6, num_recursions=None, router_alpha=1.0, init_cfg=None)
backbone_recipe = dict(paper_start=None)  # trained from scratch: no paper start
