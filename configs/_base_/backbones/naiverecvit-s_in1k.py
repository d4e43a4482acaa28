# NaiveRecursiveViT-S as the COCO / ADE20K recipes use it: naiverecvit-s.py, started where its paper starts, from its
# own ImageNet-1k checkpoint: configs/cls/naiverecvit-small_4xb256_in1k.py, from scratch, 300 epochs (as reViT's and
# MoR-ViT's papers train recursive ViTs). The classifier's checkpoint is the start as it is (the backbone loads its
# backbone.* strictly, the head is dropped); `made_by` is the command that makes it, said if the file is missing. The
# cheaper fair start, a feature-distilled one: configs/distill/ (docs/pretraining.md).
_base_ = ['./naiverecvit-s.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained(
    'naiverecvit-small_4xb256_in1k',
    "from scratch, DeiT's recipe",
    'its own ImageNet-1k classifier (no paper: as the recursive papers train theirs)',
)
