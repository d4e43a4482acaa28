# Edge-RecViT-S as the COCO / ADE20K recipes use it: edgerecvit-s.py, started where its paper starts, from its own
# ImageNet-1k checkpoint: configs/cls/edgerecvit-small_deit-pre_8xb256-300e_in1k.py, DeiT-S fine-tuned for 300 epochs
# (as its paper). The classifier's checkpoint is the start as it is (the backbone loads its backbone.* strictly, the
# head is dropped); `made_by` is the command that makes it, said if the file is missing. The cheaper fair start, a
# feature-distilled one: configs/distill/ (docs/pretraining.md).
_base_ = './edgerecvit-s.py'
backbone = dict(
    init_cfg=dict(
        type='Pretrained',
        checkpoint='checkpoints/edgerecvit-small_in1k.pth',
        made_by='python tools/train.py configs/cls/edgerecvit-small_deit-pre_8xb256-300e_in1k.py --work-dir work_dirs/edgerecvit-small_in1k'
        ' && cp $(cat work_dirs/edgerecvit-small_in1k/last_checkpoint) checkpoints/edgerecvit-small_in1k.pth',
    )
)
backbone_recipe = dict(
    differs={'start*': 'its own ImageNet-1k checkpoint, where its paper starts: it cannot represent a plain ViT'},
    intended={
        'model.backbone.init_cfg.*': 'its own ImageNet-1k checkpoint, where its paper starts (docs/pretraining.md)'
    },
)
