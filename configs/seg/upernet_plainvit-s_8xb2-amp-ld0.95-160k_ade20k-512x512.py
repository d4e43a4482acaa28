# PlainViT (baseline), ViT-Adapter's ADE20K UperNet recipe: the _base_ below.
# The backbone is the method's in every recipe (upernet_plainvit-s_8xb2-160k_ade20k-512x512.py describes it and its knobs).
_base_ = './_base_/upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py'
model = dict(backbone=dict(type='PlainViT'))  # from DeiT: block i <- DeiT block i (no choice to make)
