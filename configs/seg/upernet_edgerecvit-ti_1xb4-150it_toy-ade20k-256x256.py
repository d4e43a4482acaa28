# Toy (CPU) twin of upernet_edgerecvit-s_8xb2-160k_ade20k-512x512.py (the same method at toy size):
# ViT-Ti head + shared x4 + tail (depth 6); the shared block is initialised from checkpoint block 3.
_base_ = './_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py'
model = dict(backbone=dict(type='EdgeRecViT', depth=6, shared_init_block=3, final_norm=True))
