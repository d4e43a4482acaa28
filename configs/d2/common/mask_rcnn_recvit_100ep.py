# ViTDet's COCO recipe (projects/ViTDet/configs/COCO/mask_rcnn_vitdet_b_100ep.py) for an mmrecvit backbone:
# LSJ 1024, 100 epochs (184375 iterations of batch 64), AdamW lr 1e-4, weight decay 0.1 (none on norms and
# positions), layer-wise lr decay 0.7 with the backbone's recursion-aware layer depths (mmrecvit.d2.optim), step
# decay at 163889 and 177546, 250-iteration warm-up, fp16 AMP. Not ViTDet's: DeiT (ImageNet-1k supervised)
# rather than MAE weights, and they come through the backbone's `pretrained` (strict), not train.init_checkpoint.
# Fewer GPUs: keep dataloader.train.total_batch_size=64 only if it fits; otherwise scale optimizer.lr with it.
from detectron2 import model_zoo
from detectron2.config import LazyCall as L
from detectron2.solver import WarmupParamScheduler
from fvcore.common.param_scheduler import MultiStepParamScheduler

from mmrecvit.d2 import optimizer_params

from .coco_loader_lsj import dataloader
from .mask_rcnn_recvit import model

train = model_zoo.get_config('common/train.py').train
train.amp.enabled = True
train.ddp.fp16_compression = True
train.init_checkpoint = ''  # the backbone loads its own weights (model.backbone.net.pretrained)
train.max_iter = 184375  # 100 epochs = 184375 iterations x 64 images / 118000 images per epoch

lr_multiplier = L(WarmupParamScheduler)(
    scheduler=L(MultiStepParamScheduler)(
        values=[1.0, 0.1, 0.01], milestones=[163889, 177546], num_updates=train.max_iter
    ),
    warmup_length=250 / train.max_iter,
    warmup_factor=0.001,
)

optimizer = model_zoo.get_config('common/optim.py').AdamW
optimizer.params._target_ = optimizer_params  # get_default_optimizer_params with our layer decay
optimizer.params.layer_decay_rate = 0.7
# 0.7 as it does to a plain ViT, for every method (mmrecvit.models.layer_decay 'matched'; docs/comparison.md)
optimizer.params.layer_decay_policy = 'matched'
optimizer.params.overrides = {'pos_embed': {'weight_decay': 0.0}, 'cls_token': {'weight_decay': 0.0}}

# The anchor (detectron2's projects/ViTDet, vendored: not in detectron2's wheel) and every intended difference from
# it, as data (tools/analysis_tools/recipe_diff.py CONFIG --check). The per-method and cascade files import this dict
# and update it (an entry set to None withdraws one of these). key_map: our names for the anchor's arguments.
recipe = dict(
    anchor='vendor::detectron2-02b5c4e2.tar.gz/projects/ViTDet/configs/COCO/mask_rcnn_vitdet_b_100ep.py',
    key_map={
        'model.backbone.net.with_cp': 'model.backbone.net.use_act_checkpoint',
        'optimizer.params.layer_decay_rate': 'optimizer.params.lr_factor_func.lr_decay_rate',
    },
    intended={
        # model
        'model._target_': "RecViTRCNN: GeneralizedRCNN with the backbone's auxiliary losses and statistics",
        'model.backbone._target_': "LayerFeaturePyramid: level i from the i-th layer map (the anchor's "
        'SimpleFeaturePyramid builds all from the last)',
        'model.backbone.in_feature': "ours: in_features, the layer maps (default: all of the backbone's, finest first)",
        'model.backbone.net._target_': 'an mmrecvit backbone (PlainViT here; the per-method files set theirs)',
        'model.backbone.net.arch': 'ViT-S (384 wide, 6 heads, 12 layers); the anchor is ViT-B (the _b_ recipe)',
        'model.backbone.net.embed_dim': 'from arch',
        'model.backbone.net.depth': 'from arch',
        'model.backbone.net.num_heads': 'from arch',
        'model.backbone.net.mlp_ratio': 'from arch (4)',
        'model.backbone.net.patch_size': 'from arch (16)',
        'model.backbone.net.qkv_bias': 'ours: the timm default (True)',
        'model.backbone.net.img_size': 'ours: any input size; positions resampled from the DeiT grid',
        'model.backbone.net.norm_layer.*': "the backbones' own LayerNorm (timm's, eps 1e-6)",
        'model.backbone.net.window_block_indexes': 'ours: global_steps (default: the ends of 4 equal stages of the '
        "steps; 2, 5, 8, 11 of 12 = the complement of the anchor's)",
        'model.backbone.net.residual_block_indexes': 'ours: no residual conv blocks (the anchor: none either, [])',
        'model.backbone.net.out_feature': "ours: one map per out_indices step ('step<t>'), not one 'last_feat'",
        'model.backbone.net.use_act_checkpoint': 'activation checkpointing (with_cp; the anchor: none, 32 GB GPUs)',
        'model.backbone.net.pretrained': 'DeiT-S (ImageNet-1k supervised) weights rather than MAE, loaded strictly',
        'train.init_checkpoint': 'none: the backbone loads its own weights (the anchor: MAE ViT-B, matching heuristics)',
        # optimizer: layer decay 0.7 as the anchor's (key_map), the layer depths from the backbone
        'optimizer.params._target_': "get_default_optimizer_params with mmrecvit's recursion-aware layer decay",
        'optimizer.params.layer_decay_policy': "0.7 means a plain ViT's mean lr scale for every method (the mm twins')",
        'optimizer.params.lr_factor_func._target_': "ours: the backbone's layer depths (mmrecvit.d2.optim), not "
        "get_vit_lr_decay_rate's `blocks.<i>`",
        'optimizer.params.lr_factor_func.num_layers': "ours: from the backbone's layer positions",
        'optimizer.params.overrides.cls_token.*': "no weight decay on DeiT's CLS token (the anchor's ViT has none)",
    },
)

__all__ = ['dataloader', 'lr_multiplier', 'model', 'optimizer', 'train', 'recipe']
