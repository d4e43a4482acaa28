# Toy (CPU) twin of srvit-s_feature-distill-deit-s_4xb256-100e_in1k.py: the stand-in teacher on the toy images, the
# student starting from the teacher through its method's DeiT start (configs/_base_/backbones/srvit-s_deit.py).
_base_ = ['./_base_/feature-distill_1xb8-60it_toy.py', '../_base_/backbones/srvit-s_deit.py']
model = dict(backbone=dict(_base_.backbone, init_cfg=None))  # the start: init_from_teacher
