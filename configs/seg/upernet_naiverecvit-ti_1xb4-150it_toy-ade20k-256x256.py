# Toy (CPU) twin of upernet_naiverecvit-s_8xb2-160k_ade20k-512x512.py (the same method at toy size):
# 2 unique ViT-Ti blocks applied for 6 steps.
_base_ = './_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py'
model = dict(backbone=dict(type='NaiveRecursiveViT', depth=6, num_blocks=2, timm_init='cycle'))
