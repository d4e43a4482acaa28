# Toy (CPU) twin of srvit-small_4xb256_in1k.py: 6 ViT-Ti blocks in units [2, 2, 1, 1], T=4.
_base_ = './_base_/recvit-ti_1xb32-200it_toy-cls.py'
model = dict(
    backbone=dict(
        _delete_=True,
        type='SRViT',
        arch='tiny',
        depth=6,
        unit_sizes=(2, 2, 1, 1),
        num_recursions=4,
        timm_init='function',
        drop_path_rate=0.0,
        img_size=64,
        out_type='cls_token',
    )
)
