# Toy (CPU) twin of upernet_revit-s_8xb2-160k_ade20k-512x512.py (the same method at toy size):
# One ViT-Ti block applied 6 times, 4 experts.
_base_ = './_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py'
model = dict(
    backbone=dict(
        type='ReViT', depth=6, num_experts=4, step_drop_rate=0.0, timm_init='average', timm_gates='programmed'
    )
)
