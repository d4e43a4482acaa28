# Edge-RecViT (SPEC §3): DeiT-S head block, one shared block up to 10 times, tail block; the EARR ranker
# gives each token its depth, trained with the STB and DU losses (the paper's classification CCE loss is
# not implemented here). Not the paper's recipe: the paper fine-tunes from DeiT
# (edgerecvit-small_deit-pre_8xb256-300e_in1k.py); this trains from scratch with DeiT's recipe for
# comparison with the other methods, but, as the paper, WITHOUT label mixing (Mixup/CutMix), which would
# blur the per-token ranker's supervision. Label smoothing, RandAugment and random erasing stay.
_base_ = ['./_base_/recvit-small_4xb256_in1k.py', '../_base_/backbones/edgerecvit-s.py']
model = dict(backbone=_base_.backbone, train_cfg=None)
recipe = dict(intended={**_base_.backbone_intended, 'model.train_cfg*': 'no Mixup/CutMix, as the paper (above)'})
