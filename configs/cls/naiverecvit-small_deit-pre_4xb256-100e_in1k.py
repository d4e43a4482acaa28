# NaiveRecursiveViT (3 unique blocks x 4 cycles) fine-tuned from DeiT-S. Init shared_init='cycle' (the
# default): unique block j <- the mean of the DeiT blocks at the steps it runs (j, j + 3, j + 6, j + 9), so
# every step starts from a mean holding the DeiT block of its own depth. With 3 blocks for 12 steps it
# cannot represent DeiT's function (docs/methods/baselines.md; options 'pick' and 'average': group mappings).
_base_ = ['./_base_/recvit-small_deit-pre_4xb256-100e_in1k.py', '../_base_/backbones/naiverecvit-s_deit.py']
model = dict(backbone=_base_.backbone)
recipe = _base_.backbone_recipe
