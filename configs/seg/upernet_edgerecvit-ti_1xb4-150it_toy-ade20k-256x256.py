# Toy (CPU) variant of upernet_edgerecvit-s_8xb2-160k_ade20k-512x512.py: ViT-Ti head + shared x4 + tail (L=6).
_base_ = './_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py'
model = dict(backbone=dict(type='EdgeRecViT', arch='tiny', depth=6, shared_init_block=3, out_indices=(0, 2, 3, 5)))
