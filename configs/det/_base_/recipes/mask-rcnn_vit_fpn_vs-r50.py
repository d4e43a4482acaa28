# What the 1x and 3x recipes (../mask-rcnn_vit_fpn_1x_coco.py, ../mask-rcnn_vit_fpn_8xb2-ms-crop-3x_coco.py) share
# as differences from their anchors, mmdet's own ResNet-50 Mask R-CNN files (recipe_diff data: each recipe adds its
# anchor and its schedule's entries; tools/analysis_tools/recipe_diff.py).
recipe = dict(
    intended={
        # runtime (../models/mask-rcnn_vit_fpn.py)
        'custom_imports.*': 'registers mmrecvit',
        'custom_*hooks.RecursionHook*': "the backbones' auxiliary losses and statistics",
        'custom_*hooks.RNGStateHook*': 'the RNG state in checkpoints (exact resume)',
        'custom_*hooks.TF32Hook*': 'TF32 matmuls on Ampere+',
        'default_hooks.checkpoint.type': 'AtomicCheckpointHook: a run killed mid-save resumes',
        'find_unused_parameters': 'stated: every parameter is in every graph',
        'randomness.*': 'seed 0 with diff_rank_seed',
        'tta_*': 'flip test-time augmentation with mask merging (tools/test.py --tta)',
        '*_dataloader.dataset.type': 'CheckedCocoDataset: bad annotations dropped with a warning naming the file',
        # model: a ViT from DeiT-S instead of ResNet-50 from torchvision
        'embed_dim': 'a config variable of ours (the width the neck is computed from)',
        'model.backbone.type': 'an mmrecvit backbone',
        'model.backbone.arch': 'ViT-S (384 wide, 6 heads, 12 layers)',
        'model.backbone.drop_path_rate': 'drop path 0.1 (ViTDet-S / ViT-Adapter-S)',
        'model.backbone.init_cfg.checkpoint': 'DeiT-S (ImageNet-1k supervised) weights',
        'model.backbone.depth': "ResNet's depth (50); a recursive method's steps (12)",
        'model.backbone.frozen_stages': "ResNet's (the ViT trains whole)",
        'model.backbone.norm_cfg.*': "ResNet's BatchNorm (the backbones' own LayerNorm)",
        'model.backbone.norm_eval': "ResNet's frozen BatchNorm statistics",
        'model.backbone.num_stages': "ResNet's",
        'model.backbone.style': "ResNet's",
        'model.backbone.out_indices': "ResNet's stages; ours: the class default (the ends of the 4 quarters)",
        'model.neck*': "SimplePyramid (the recursion steps' maps to strides 4-32) + mmdet's FPN on them (the anchor: "
        "FPN on ResNet's 4 stages)",
        # optimizer: AdamW as for ViTs (the anchors: SGD 0.02, momentum 0.9, weight decay 1e-4)
        'optim_wrapper.optimizer.type': 'AdamW',
        'optim_wrapper.optimizer.lr': 'AdamW lr 1e-4 at batch 16',
        'optim_wrapper.optimizer.betas': "AdamW's (0.9, 0.999)",
        'optim_wrapper.optimizer.momentum': "SGD's (not AdamW's)",
        'optim_wrapper.optimizer.weight_decay': 'AdamW weight decay 0.05',
        'optim_wrapper.paramwise_cfg.custom_keys.*': 'no weight decay on positions, the CLS token and norms',
    },
    expected={  # differences by design, and the values they must have
        'model.backbone.drop_path_rate': 0.1,
        'optim_wrapper.optimizer.type': 'AdamW',
        'optim_wrapper.optimizer.lr': 1e-4,
        'optim_wrapper.optimizer.betas': [0.9, 0.999],
        'optim_wrapper.optimizer.weight_decay': 0.05,
    },
)
