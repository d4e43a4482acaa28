# Toy (CPU) twin of naiverecvit-small_4xb256_in1k.py: 2 unique ViT-Ti blocks, 6 steps.
_base_ = './_base_/recvit-ti_1xb32-200it_toy-cls.py'
model = dict(
    backbone=dict(
        _delete_=True,
        type='NaiveRecursiveViT',
        arch='tiny',
        depth=6,
        num_blocks=2,
        timm_init='cycle',
        drop_path_rate=0.0,
        img_size=64,
        out_type='cls_token',
    )
)
