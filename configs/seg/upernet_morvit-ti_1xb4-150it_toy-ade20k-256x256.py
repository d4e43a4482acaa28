# Toy (CPU) variant of upernet_morvit-s_8xb2-160k_ade20k-512x512.py: ViT-Ti first block, shared x4, last (6 steps).
_base_ = './_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py'
model = dict(backbone=dict(_delete_=True, type='MoRViT', arch='tiny', num_recursions=4, routing='expert_choice',
                           shared_init_block=2, out_indices=(0, 2, 3, 5)))
