# Toy (CPU) twin of plainvit-small_4xb256_in1k.py: the same method at the toy size
# (configs/_base_/backbones/plainvit-toy.py), on the toy classification recipe (the first _base_).
_base_ = ['./_base_/recvit-ti_1xb32-200it_toy-cls.py', '../_base_/backbones/plainvit-toy.py']
model = dict(backbone=_base_.backbone)
