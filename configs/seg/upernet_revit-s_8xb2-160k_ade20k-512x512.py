# reViT (SPEC §2): one shared DeiT-S block applied 12 times with 4 depth-programmed expert FFNs;
# outputs at normalised depths 0.25/0.5/0.75/1.0. Elastic depth at test time:
#   --cfg-options model.backbone.depth=8
_base_ = './_base_/upernet_vit_8xb2-160k_ade20k-512x512.py'
model = dict(backbone=dict(type='ReViT', arch='small', depth=12, num_experts=4,
                           out_depths=(0.25, 0.5, 0.75, 1.0)))
