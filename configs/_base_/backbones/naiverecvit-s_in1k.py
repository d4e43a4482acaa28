# NaiveRecursiveViT-S as the COCO / ADE20K recipes use it: naiverecvit-s.py, started where its paper starts, from its
# own ImageNet-1k checkpoint: configs/cls/naiverecvit-small_4xb256_in1k.py, from scratch, 300 epochs (as reViT's and
# MoR-ViT's papers train recursive ViTs). The classifier's checkpoint is the start as it is (the backbone loads its
# backbone.* strictly, the head is dropped); `made_by` is the command that makes it, said if the file is missing. The
# cheaper fair start, a feature-distilled one: configs/distill/ (docs/pretraining.md).
_base_ = './naiverecvit-s.py'
backbone = dict(
    init_cfg=dict(
        type='Pretrained',
        checkpoint='checkpoints/naiverecvit-small_in1k.pth',
        made_by='python tools/train.py configs/cls/naiverecvit-small_4xb256_in1k.py --work-dir work_dirs/naiverecvit-small_in1k'
        ' && cp $(cat work_dirs/naiverecvit-small_in1k/last_checkpoint) checkpoints/naiverecvit-small_in1k.pth',
    )
)
backbone_recipe = dict(
    differs={
        'start.checkpoint': (
            'naiverecvit-small_in1k.pth',
            'its own ImageNet-1k classifier (no paper: as the recursive papers train theirs)',
        ),
        'start.made_by': ('configs/cls/naiverecvit-small_4xb256_in1k.py', "from scratch, DeiT's recipe"),
    },
    intended={
        'model.backbone.init_cfg.*': 'its own ImageNet-1k checkpoint, where its paper starts (docs/pretraining.md)'
    },
)
