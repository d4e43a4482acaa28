# Toy (CPU) twin of upernet_morvit-s_8xb2-160k_ade20k-512x512.py (the same method at toy size):
# ViT-Ti first block, shared x4, last (depth 6); from a checkpoint (timm_init='average') the shared block starts
# as the mean of the layers it replaces.
_base_ = './_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py'
model = dict(backbone=dict(type='MoRViT', depth=6, timm_init='average', timm_gates='open', router_alpha=1.0))
