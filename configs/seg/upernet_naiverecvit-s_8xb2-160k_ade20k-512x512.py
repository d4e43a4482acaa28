# Baseline: naive recursion (SPEC §0) - 3 unique DeiT-S blocks applied cyclically for 12 steps,
# outputs after steps 3/6/9/12.
_base_ = './_base_/upernet_vit_8xb2-160k_ade20k-512x512.py'
model = dict(backbone=dict(type='NaiveRecursiveViT', arch='small', depth=12, num_blocks=3,
                           out_indices=(2, 5, 8, 11)))
