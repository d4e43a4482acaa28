# SR-ViT-B as the COCO / ADE20K recipes use it: srvit-s_in1k.py at ViT-B width, from its own ViT-B ImageNet-1k
# classifier (configs/cls/srvit-base_4xb256_in1k.py).
_base_ = './srvit-s_in1k.py'
backbone = dict(
    arch='base',
    init_cfg=dict(
        checkpoint='checkpoints/srvit-base_in1k.pth',
        made_by='python tools/train.py configs/cls/srvit-base_4xb256_in1k.py --work-dir work_dirs/srvit-base_in1k'
        ' && cp $(cat work_dirs/srvit-base_in1k/last_checkpoint) checkpoints/srvit-base_in1k.pth',
    ),
)
backbone_recipe = dict(
    paper_start='configs/cls/srvit-base_4xb256_in1k.py',
    differs={
        'start.checkpoint': ('srvit-base_in1k.pth', 'its own ImageNet-1k classifier, where its paper starts'),
        'start.made_by': ('configs/cls/srvit-base_4xb256_in1k.py', 'its paper trains SR-ViT at each T on IN-1k'),
    },
)
