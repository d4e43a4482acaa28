# The ImageNet-1k recipe (./recvit-small_4xb256_in1k.py) at ViT-B width: a per-method ViT-B start names it as its first
# _base_ and its method's backbone file as the second, as its -small recipe does (the methods whose -small recipe
# changes more than the backbone inherit that recipe and restate these lines instead).
_base_ = ['./recvit-small_4xb256_in1k.py', '../../_base_/widths.py']
embed_dim, model, recipe = _base_.pop('widths').cls('b')
