# Toy (CPU) twin of upernet_morvit-s_8xb2-160k_ade20k-512x512.py (the same method at toy size):
# ViT-Ti first block, shared x4, last (depth 6); with timm_init='pick' the shared block comes from checkpoint block 2.
_base_ = './_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py'
model = dict(
    backbone=dict(type='MoRViT', depth=6, shared_init_block=2, timm_init='average', timm_gates='open', router_alpha=1.0)
)
