# reViT (SPEC §2): one shared DeiT-S block applied depth=12 times with num_experts=4 depth-programmed
# expert FFNs; outputs at normalised depths 0.25/0.5/0.75/1.0 (the default out_depths).
# Elastic depth at test time:  --cfg-options model.backbone.depth=8
_base_ = './_base_/upernet_vit_8xb2-160k_ade20k-512x512.py'
model = dict(backbone=dict(type='ReViT', depth=12, num_experts=4))
