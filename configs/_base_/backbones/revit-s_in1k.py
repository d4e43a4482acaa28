# reViT-S as the COCO / ADE20K recipes use it: the dense recipes' reViT-S (revit-s_deit.py: step_drop_rate=0.0),
# started where its paper starts, from its own ImageNet-1k checkpoint: configs/cls/revit-small_4xb256_in1k.py, from
# scratch, 300 epochs (its paper trains from scratch with DeiT III's recipe). The classifier's checkpoint is the start
# as it is (the backbone loads its backbone.* strictly, the head is dropped); `made_by` is the command that makes it,
# said if the file is missing. The cheaper fair start, a feature-distilled one: configs/distill/
# (docs/pretraining.md).
_base_ = ['./revit-s_deit.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained('revit-small_4xb256_in1k', "from scratch, DeiT's recipe")
