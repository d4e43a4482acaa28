# Toy (CPU) twin of upernet_srvit-s_8xb2-160k_ade20k-512x512.py: the same method at the toy size
# (configs/_base_/backbones/srvit-toy.py), on the toy recipe (the first _base_).
_base_ = ['./_base_/upernet_vit-ti_1xb4-150it_toy-ade20k-256x256.py', '../_base_/backbones/srvit-toy.py']
model = dict(backbone=_base_.backbone)
