# ViT-Adapter's ADE20K UperNet recipe (./upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py) at ViT-Ti width, from
# DeiT-Ti, with their ViT-T drop path 0.1 (layer decay 0.95 as for S): the iso-parameter reference of the shared-weight
# methods (docs/comparison.md). The width is set once, `embed_dim`; the neck's and heads' widths are restated from it.
_base_ = ['./upernet_vit_8xb2-amp-ld0.95-160k_ade20k-512x512.py', '../../_base_/widths.py']
embed_dim, model, recipe = _base_.pop('widths').seg('ti')
