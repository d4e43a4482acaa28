# SR-ViT-B: srvit-small_4xb256_in1k.py at ViT-B width, the start of SR-ViT's ViT-B dense recipes
# (configs/_base_/backbones/srvit-b_in1k.py).
_base_ = ['./srvit-small_4xb256_in1k.py', '../_base_/widths.py']
embed_dim, model, recipe = _base_.pop('widths').cls('b')
