# MoR-ViT at the toy size (the toy configs of every task: ViT-Ti first block, shared x4, last: 6 layers; with
# timm_init='pick' the shared block would come from checkpoint block 2; trained from scratch); otherwise the dense
# recipes' morvit-s_deit.py.
_base_ = './morvit-s_deit.py'
backbone = dict(arch='tiny', depth=6, num_recursions=None, shared_init_block=2, init_cfg=None)  # 4 recursions
