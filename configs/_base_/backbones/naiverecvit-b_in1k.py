# NaiveRecursiveViT-B as the COCO / ADE20K recipes use it: naiverecvit-s_in1k.py at ViT-B width, from its own ViT-B
# ImageNet-1k checkpoint (the ViT-S recipe at ViT-B width: `made_by`).
_base_ = './naiverecvit-s_in1k.py'
backbone = dict(
    arch='base',
    init_cfg=dict(
        checkpoint='checkpoints/naiverecvit-base_in1k.pth',
        made_by='python tools/train.py configs/cls/naiverecvit-small_4xb256_in1k.py --work-dir work_dirs/naiverecvit-base_in1k'
        ' --cfg-options model.backbone.arch=base model.head.in_channels=768'
        ' && cp $(cat work_dirs/naiverecvit-base_in1k/last_checkpoint) checkpoints/naiverecvit-base_in1k.pth',
    ),
)
