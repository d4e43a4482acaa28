# MoR-ViT-B as the COCO / ADE20K recipes use it: morvit-s_in1k.py at ViT-B width, from its own ViT-B ImageNet-1k
# checkpoint (configs/cls/morvit-base_4xb256_in1k.py).
_base_ = './morvit-s_in1k.py'
backbone = dict(
    arch='base',
    init_cfg=dict(
        checkpoint='checkpoints/morvit-base_in1k.pth',
        made_by='python tools/train.py configs/cls/morvit-base_4xb256_in1k.py --work-dir work_dirs/morvit-base_in1k'
        ' && cp $(cat work_dirs/morvit-base_in1k/last_checkpoint) checkpoints/morvit-base_in1k.pth',
    ),
)
backbone_recipe = dict(
    paper_start='configs/cls/morvit-base_4xb256_in1k.py',
    differs={
        'start.checkpoint': ('morvit-base_in1k.pth', 'its own ImageNet-1k classifier, where its paper starts'),
        'start.made_by': ('configs/cls/morvit-base_4xb256_in1k.py', "from scratch, DeiT's recipe at ViT-B width"),
    },
)
