# Edge-RecViT (docs/methods/edge_recvit.md): DeiT-S head block, one shared block up to 10 times, tail block; the EARR ranker
# gives each token its depth, trained with the STB and DU losses and, in classification, the paper's CCE loss
# (below). Not the paper's recipe: the paper fine-tunes from DeiT
# (edgerecvit-small_deit-pre_8xb256-300e_in1k.py); this trains from scratch with DeiT's recipe for
# comparison with the other methods, but, as the paper, WITHOUT label mixing (Mixup/CutMix), which would
# blur the per-token ranker's supervision. Label smoothing, RandAugment and random erasing stay.
_base_ = ['./_base_/recvit-small_4xb256_in1k.py', '../_base_/backbones/edgerecvit-s.py']
custom_hooks = [*_base_.custom_hooks, _base_.temperature_schedule]  # Edge-RecViT's tau annealed
# CCE (paper 002, docs/methods/edge_recvit.md): the logits scaled by the mean confidence of the ranker's depth
# decisions, its main training signal in classification (mmrecvit/mm/cce.py).
custom_imports = dict(imports=['mmrecvit.mm', 'mmrecvit.mm.cce'], allow_failed_imports=False)
model = dict(type='ConfidenceScaledClassifier', backbone=_base_.backbone, train_cfg=None)
recipe = dict(
    _base_.backbone_recipe,
    intended={
        **_base_.backbone_recipe.intended,
        'model.train_cfg*': 'no Mixup/CutMix, as the paper (above)',
        'model.type': "Edge-RecViT's CCE loss (above)",
    },
)
