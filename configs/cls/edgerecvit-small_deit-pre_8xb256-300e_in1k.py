# Edge-RecViT fine-tuned from DeiT-S: the paper's own recipe (all its models start from the public
# non-distilled DeiT checkpoints and are fine-tuned at 224 px for 300 epochs on 8 GPUs x 256 images, AdamW
# with cosine decay), and, as the paper, WITHOUT label mixing (Mixup/CutMix: they disturb the token
# ranker's supervision). The learning rate (not in our notes) follows this folder's fine-tune rule,
# 2.5e-4 x batch/512. Init (docs/methods/edge_recvit.md, the authors' code): head <- DeiT block 0, shared <- block 6
# (shared_init_block), tail <- block 11; the ranker starts fresh.
_base_ = ['./_base_/recvit-small_deit-pre_4xb256-100e_in1k.py', '../_base_/backbones/edgerecvit-s_deit.py']
custom_hooks = [*_base_.custom_hooks, _base_.temperature_schedule]  # Edge-RecViT's tau annealed
# CCE (paper 002, docs/methods/edge_recvit.md): the logits scaled by the mean confidence of the ranker's depth
# decisions, its main training signal in classification (mmrecvit/mm/cce.py).
custom_imports = dict(imports=['mmrecvit.mm', 'mmrecvit.mm.cce'], allow_failed_imports=False)
model = dict(type='ConfidenceScaledClassifier', backbone=_base_.backbone, train_cfg=None)

max_epochs = 300
train_dataloader = dict(batch_size=256)  # x 8 GPUs
train_cfg = dict(max_epochs=max_epochs)
optim_wrapper = dict(optimizer=dict(lr=2.5e-4 * 2048 / 512))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=5, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=5, end=max_epochs),
]
auto_scale_lr = dict(base_batch_size=2048)
recipe = dict(
    _base_.backbone_recipe,
    intended={  # the backbone's arguments and the paper's schedule (recipe_diff against the base's anchor)
        **_base_.backbone_recipe.intended,
        'model.train_cfg*': 'no Mixup/CutMix, as the paper (above)',
        'model.type': "Edge-RecViT's CCE loss (above)",
        'auto_scale_lr.base_batch_size': 'the 8 x 256 batch the learning rate is written for',
        # The paper's 300 epochs and 2.5e-4 x 2048/512 = 1e-3 are the anchor's own values: the fine-tune base's
        # entries for them are withdrawn (None).
        'train_cfg.max_epochs': None,
        'optim_wrapper.optimizer.lr': None,
    },
)
