# reViT with the paper's elastic-depth training (docs/methods/revit.md): each step dropped with probability 0.3 per image in
# training, so that the model can be tested at other depths (--cfg-options model.backbone.depth=8); otherwise
# its fixed-depth twin upernet_revit-s_8xb2-160k_ade20k-512x512.py.
_base_ = './upernet_revit-s_8xb2-160k_ade20k-512x512.py'
model = dict(backbone=dict(step_drop_rate=0.3))
recipe = dict(  # compare.py: its one difference from its fixed-depth twin, declared with its value
    differs={'model.backbone.step_drop_rate': (0.3, "the paper's elastic depth: each step dropped per image, p 0.3")}
)
