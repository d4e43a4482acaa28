# reViT-B: revit-small_4xb256_in1k.py at ViT-B width, the start of reViT's ViT-B dense recipes
# (configs/_base_/backbones/revit-b_in1k.py).
_base_ = ['./revit-small_4xb256_in1k.py', '../_base_/widths.py']
embed_dim, model, recipe = _base_.pop('widths').cls('b')
