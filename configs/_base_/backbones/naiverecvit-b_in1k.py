# NaiveRecursiveViT-B as the COCO / ADE20K recipes use it: naiverecvit-s_in1k.py at ViT-B width, from its own ViT-B
# ImageNet-1k checkpoint (configs/cls/naiverecvit-base_4xb256_in1k.py).
_base_ = './naiverecvit-s_in1k.py'
backbone = dict(
    arch='base',
    init_cfg=dict(
        checkpoint='checkpoints/naiverecvit-base_in1k.pth',
        made_by='python tools/train.py configs/cls/naiverecvit-base_4xb256_in1k.py --work-dir work_dirs/naiverecvit-base_in1k'
        ' && cp $(cat work_dirs/naiverecvit-base_in1k/last_checkpoint) checkpoints/naiverecvit-base_in1k.pth',
    ),
)
backbone_recipe = dict(
    differs={
        'start.checkpoint': (
            'naiverecvit-base_in1k.pth',
            'its own ImageNet-1k classifier (no paper: as the recursive papers train theirs)',
        ),
        'start.made_by': ('configs/cls/naiverecvit-base_4xb256_in1k.py', "from scratch, DeiT's recipe at ViT-B width"),
    },
)
