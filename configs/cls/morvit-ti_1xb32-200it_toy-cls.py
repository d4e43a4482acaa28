# Toy (CPU) variant of morvit-small_4xb256_in1k.py: ViT-Ti first block, shared x4, last (6 steps),
# expert-choice routing.
_base_ = './_base_/recvit-ti_1xb32-200it_toy-cls.py'
model = dict(backbone=dict(_delete_=True, type='MoRViT', arch='tiny', num_recursions=4, routing='expert_choice',
                           shared_init_block=2, img_size=64, out_type='cls_token'))
