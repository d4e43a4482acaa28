# Toy (CPU) twin of upernet_plainvit-s_8xb2-160k_ade20k-512x512.py (the same method at toy size):
# A 6-block ViT-Ti.
_base_ = './_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py'
model = dict(backbone=dict(type='PlainViT', depth=6))
