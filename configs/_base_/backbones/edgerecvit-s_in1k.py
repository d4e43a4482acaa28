# Edge-RecViT-S as the COCO / ADE20K recipes use it: edgerecvit-s.py, started where its paper starts, from its own
# ImageNet-1k checkpoint: configs/cls/edgerecvit-small_deit-pre_8xb256-300e_in1k.py, DeiT-S fine-tuned for 300 epochs
# (as its paper). The classifier's checkpoint is the start as it is (the backbone loads its backbone.* strictly, the
# head is dropped); `made_by` is the command that makes it, said if the file is missing. The cheaper fair start, a
# feature-distilled one: configs/distill/ (docs/pretraining.md).
_base_ = ['./edgerecvit-s.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained(
    'edgerecvit-small_deit-pre_8xb256-300e_in1k',
    'its paper: DeiT-S fine-tuned',
    then={
        'pretraining.from': ('DeiT-S', 'its paper fine-tunes the public DeiT-S'),
        'pretraining.batch': (2048, "its paper's 8 x 256"),
        'pretraining.mixup': (False, "its paper drops label mixing: it blurs the ranker's supervision"),
        'pretraining.loss': ('CCE: cross-entropy, label smoothing 0.1', "its paper's CCE trains the ranker"),
    },
    why='its own ImageNet-1k checkpoint, where its paper starts',
    held="its depth draw's temperature, held at its start's final 0.1 (docs/methods/edge_recvit.md)",
    run='edgerecvit-small_in1k',
)
# Its start's ranker ends its pretraining at tau 0.1 (that recipe's schedule, its checkpoint's meta): held there, so the
# dense training draws the depths its start was trained to (a restart at 1.0 would draw them nearly at random).
temperature_schedule = dict(start=0.1, end=0.1)
