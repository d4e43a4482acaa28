# Toy (CPU) variant of upernet_srvit-s_8xb2-160k_ade20k-512x512.py: 6 ViT-Ti blocks in units [2, 2, 1, 1], T=4.
_base_ = './_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py'
model = dict(backbone=dict(_delete_=True, type='SRViT', arch='tiny', num_blocks=6, unit_sizes=(2, 2, 1, 1), num_recursions=4, readout='soft'))
