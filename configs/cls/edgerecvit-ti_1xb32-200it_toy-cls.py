# Toy (CPU) twin of edgerecvit-small_4xb256_in1k.py: ViT-Ti head + shared x4 + tail (L=6).
_base_ = './_base_/recvit-ti_1xb32-200it_toy-cls.py'
model = dict(
    backbone=dict(
        _delete_=True,
        type='EdgeRecViT',
        arch='tiny',
        depth=6,
        shared_init_block=3,
        final_norm=True,
        drop_path_rate=0.0,
        img_size=64,
        out_type='cls_token',
    )
)
