# Toy (CPU) twin of plainvit-small_4xb256_in1k.py: a 6-block ViT-Ti.
_base_ = './_base_/recvit-ti_1xb32-200it_toy-cls.py'
model = dict(
    backbone=dict(
        _delete_=True, type='PlainViT', arch='tiny', depth=6, drop_path_rate=0.0, img_size=64, out_type='cls_token'
    )
)
