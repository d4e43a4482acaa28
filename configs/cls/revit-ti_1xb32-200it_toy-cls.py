# Toy (CPU) twin of revit-small_4xb256_in1k.py: one ViT-Ti block applied 6 times, 4 experts.
_base_ = './_base_/recvit-ti_1xb32-200it_toy-cls.py'
model = dict(
    backbone=dict(
        _delete_=True,
        type='ReViT',
        arch='tiny',
        depth=6,
        num_experts=4,
        step_drop_rate=0.0,
        timm_init='average',
        timm_gates='programmed',
        drop_path_rate=0.0,
        img_size=64,
        out_type='cls_token',
    )
)
