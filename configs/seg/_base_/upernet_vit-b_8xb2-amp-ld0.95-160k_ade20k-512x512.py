# ViT-Adapter's ADE20K UperNet recipe (./upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py) at ViT-B width, from
# DeiT-B, with their ViT-B drop path 0.3 (layer decay 0.95 as for S). The width is set once, `embed_dim`; the neck's
# and heads' widths are restated from it (mmengine computed the base's from the base's embed_dim, 384).
_base_ = ['./upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py', '../../_base_/widths.py']
embed_dim, model, recipe = _base_.pop('widths').seg('b')
