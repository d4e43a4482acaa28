# SR-ViT (SoftMoR, docs/methods/srvit.md): DeiT-S blocks in units [4, 4, 2, 2], each run T=4 steps and mixed per token;
# the CLS token of the last unit's mixture is classified. Paper: 82.48 % top-1 (T=4) vs 79.83 % (T=1), trained on
# ImageNet-1k at each T with a longer warm-up for larger T: here 20 epochs at T=4 (5 x T; decision: the paper's
# figure is not in our notes), DeiT's recipe otherwise. Its output is the start of SR-ViT's dense recipes
# (configs/_base_/backbones/srvit-s_in1k.py), as its paper transfers it.
_base_ = ['./_base_/recvit-small_4xb256_in1k.py', '../_base_/backbones/srvit-s.py']
model = dict(backbone=_base_.backbone)
warmup_epochs = 20
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=warmup_epochs),
]
recipe = dict(
    _base_.backbone_recipe,
    intended={
        **_base_.backbone_recipe.intended,
        'warmup_epochs': 'a config variable of ours',
        # 20 warm-up epochs are mmpretrain's own (the anchor's): the base's entries for DeiT's 5 are withdrawn
        'param_scheduler.LinearLR.end': None,
        'param_scheduler.CosineAnnealingLR.begin': None,
    },
)
