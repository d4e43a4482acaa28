# Toy (CPU) variant of upernet_revit-s_8xb2-160k_ade20k-512x512.py: one ViT-Ti block applied 6 times, 4 experts.
_base_ = './_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py'
model = dict(backbone=dict(type='ReViT', arch='tiny', depth=6, num_experts=4, out_depths=(0.25, 0.5, 0.75, 1.0)))
