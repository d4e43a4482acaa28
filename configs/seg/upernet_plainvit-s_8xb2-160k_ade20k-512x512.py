# Baseline: plain DeiT-S ViT, 12 distinct blocks (depth 12 from the base's arch='small'); outputs after
# blocks 3/6/9/12 (the default out_indices).
_base_ = './_base_/upernet_vit_8xb2-160k_ade20k-512x512.py'
model = dict(backbone=dict(type='PlainViT'))  # from DeiT: block i <- DeiT block i (no choice to make)
