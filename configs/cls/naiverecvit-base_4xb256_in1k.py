# NaiveRecursiveViT-B: naiverecvit-small_4xb256_in1k.py at ViT-B width (the recipe at B width, then the
# backbone file), the start of NaiveRecursiveViT's ViT-B dense recipes
# (configs/_base_/backbones/naiverecvit-b_in1k.py).
_base_ = ['./_base_/recvit-base_4xb256_in1k.py', '../_base_/backbones/naiverecvit-s.py']
model = dict(backbone=dict(_base_.backbone, arch='base'))  # its -s backbone file, at B width
recipe = _base_.backbone_recipe
