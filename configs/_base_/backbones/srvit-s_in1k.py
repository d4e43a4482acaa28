# SR-ViT-S as the COCO / ADE20K recipes use it: srvit-s.py, started where its paper starts, from its own ImageNet-1k
# classifier: configs/cls/srvit-small_4xb256_in1k.py, trained at T=4 from scratch with the longer warm-up its paper
# uses for larger T. The classifier's checkpoint is the start as it is (the backbone loads its backbone.* strictly, the
# head is dropped); `made_by` is the command that makes it, said if the file is missing. The DeiT function start
# (srvit-s_deit.py) is a control: its recursions start dormant.
_base_ = ['./srvit-s.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained(
    'srvit-small_4xb256_in1k',
    'its paper trains SR-ViT at each T on IN-1k',
    then={'pretraining.warmup_epochs': (20, "its paper's longer warm-up for larger T (docs/pretraining.md)")},
)
