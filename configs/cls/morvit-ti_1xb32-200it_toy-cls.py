# Toy (CPU) twin of morvit-small_4xb256_in1k.py: ViT-Ti first block, shared x4, last (6 steps),
# expert-choice routing.
_base_ = './_base_/recvit-ti_1xb32-200it_toy-cls.py'
model = dict(
    backbone=dict(
        _delete_=True,
        type='MoRViT',
        arch='tiny',
        depth=6,
        timm_init='average',
        timm_gates='open',
        router_alpha=1.0,
        drop_path_rate=0.0,
        img_size=64,
        out_type='cls_token',
    )
)
