# Toy (CPU) variant of revit-small_4xb256_in1k.py: one ViT-Ti block applied 6 times, 4 experts.
_base_ = './_base_/recvit-ti_1xb32-200it_toy-cls.py'
model = dict(backbone=dict(_delete_=True, type='ReViT', arch='tiny', depth=6, num_experts=4, img_size=64,
                           out_type='cls_token'))
