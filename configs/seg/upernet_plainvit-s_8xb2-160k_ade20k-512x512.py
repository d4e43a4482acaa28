# Baseline: plain DeiT-S ViT (12 distinct blocks), outputs after blocks 3/6/9/12.
_base_ = './_base_/upernet_vit_8xb2-160k_ade20k-512x512.py'
model = dict(backbone=dict(type='PlainViT', arch='small', out_indices=(2, 5, 8, 11)))
