# Edge-RecViT-B as the COCO / ADE20K recipes use it: edgerecvit-s_in1k.py at ViT-B width, from its own ViT-B
# ImageNet-1k checkpoint (the ViT-S recipe at ViT-B width: `made_by`).
_base_ = './edgerecvit-s_in1k.py'
backbone = dict(
    arch='base',
    init_cfg=dict(
        checkpoint='checkpoints/edgerecvit-base_in1k.pth',
        made_by='python tools/train.py configs/cls/edgerecvit-small_deit-pre_8xb256-300e_in1k.py --work-dir work_dirs/edgerecvit-base_in1k'
        ' --cfg-options model.backbone.arch=base model.head.in_channels=768'
        ' model.backbone.init_cfg.checkpoint=checkpoints/deit_base_patch16_224-b5f2ef4d.pth'
        ' && cp $(cat work_dirs/edgerecvit-base_in1k/last_checkpoint) checkpoints/edgerecvit-base_in1k.pth',
    ),
)
