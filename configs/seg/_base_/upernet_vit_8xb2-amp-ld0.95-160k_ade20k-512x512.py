# ViT-Adapter's ADE20K UperNet recipe for DeiT-S (Chen et al., "Vision Transformer Adapter for Dense Predictions",
# ICLR 2023; their segmentation/configs/ade20k/upernet_deit_adapter_small_512_160k_ade20k.py) for an mmrecvit
# backbone, on mmseg's 160k recipe (./upernet_vit_8xb2-160k_ade20k-512x512.py: 512x512 crops, batch 16 = 8 GPUs x
# 2 images, AdamW lr 6e-5 weight decay 0.01, 1500-iteration warm-up then poly, 160k iterations) with their changes:
# * layer-wise lr decay 0.95 (mmrecvit's recursion-aware constructor), no weight decay on biases either (their
#   BEiT-style constructor decays no 1-D parameter), drop path 0.2, global attention;
# * sliding-window inference: 512x512 windows at stride 341 on the image resized to the 2048x512 scale;
# * fp16 AMP (their fp16 loss scaling).
# Fewer GPUs: see the accumulation note in ./upernet_vit_8xb2-160k_ade20k-512x512.py (multiply max_iters and the
# schedule's ends by K). bf16 backbone (A100/H100): `--amp-dtype bf16`.
_base_ = './upernet_vit_8xb2-160k_ade20k-512x512.py'

model = dict(
    backbone=dict(drop_path_rate=0.2, window_size=0),
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)),
)
optim_wrapper = dict(
    type='AmpOptimWrapper',  # fp16 autocast (its default dtype) with dynamic loss scaling
    constructor='LayerDecayOptimWrapperConstructor',
    # 0.95 as it does to a plain ViT, for every method (mmrecvit/models/layer_decay.py 'matched'; docs/comparison.md)
    paramwise_cfg=dict(layer_decay_rate=0.95, layer_decay_policy='matched', custom_keys={'bias': dict(decay_mult=0.0)}),
)
recipe = dict(
    intended={  # ViT-Adapter's changes above, on the base's intended differences from mmseg's file
        'model.backbone.drop_path_rate': "ViT-Adapter's 0.2 for DeiT-S",
        'model.test_cfg.*': 'sliding-window inference',
        'optim_wrapper.type': 'fp16 AMP',
        'optim_wrapper.constructor': 'layer-wise lr decay',
        'optim_wrapper.paramwise_cfg.layer_decay_rate': "ViT-Adapter's 0.95",
        'optim_wrapper.paramwise_cfg.layer_decay_policy': "0.95 means a plain ViT's mean lr scale for every method",
        'optim_wrapper.paramwise_cfg.custom_keys.bias.*': 'no weight decay on biases',
    }
)
