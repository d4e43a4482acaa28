# Toy (CPU) twin of upernet_srvit-s_8xb2-160k_ade20k-512x512.py (the same method at toy size):
# 6 ViT-Ti blocks in units [2, 2, 1, 1], T=4 (24 applications).
_base_ = './_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py'
model = dict(backbone=dict(type='SRViT', depth=6, unit_sizes=(2, 2, 1, 1), num_recursions=4, timm_init='function'))
