# reViT with the paper's elastic-depth training (docs/methods/revit.md): each step dropped with probability 0.3 per image in
# training, so that the model can be tested at other depths (--cfg-options model.backbone.depth=8); otherwise
# its fixed-depth twin mask-rcnn_revit-s_fpn_1x_coco.py.
_base_ = './mask-rcnn_revit-s_fpn_1x_coco.py'
model = dict(backbone=dict(step_drop_rate=0.3))
recipe = dict(  # compare.py: its one difference from its fixed-depth twin, declared with its value
    differs={'model.backbone.step_drop_rate': (0.3, "the paper's elastic depth: each step dropped per image, p 0.3")}
)
