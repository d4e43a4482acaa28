# Edge-RecViT-B as the COCO / ADE20K recipes use it: edgerecvit-s_in1k.py at ViT-B width, from its own ViT-B
# ImageNet-1k checkpoint (its paper's recipe at ViT-B width, from DeiT-B: configs/cls/edgerecvit-base_deit-pre_8xb256-300e_in1k.py).
_base_ = './edgerecvit-s_in1k.py'
backbone = dict(
    arch='base',
    init_cfg=dict(
        checkpoint='checkpoints/edgerecvit-base_in1k.pth',
        made_by='python tools/train.py configs/cls/edgerecvit-base_deit-pre_8xb256-300e_in1k.py'
        ' --work-dir work_dirs/edgerecvit-base_in1k'
        ' && cp $(cat work_dirs/edgerecvit-base_in1k/last_checkpoint) checkpoints/edgerecvit-base_in1k.pth',
    ),
)
backbone_recipe = dict(
    paper_start='configs/cls/edgerecvit-base_deit-pre_8xb256-300e_in1k.py',
    differs={
        'start.checkpoint': ('edgerecvit-base_in1k.pth', 'its own ImageNet-1k checkpoint, where its paper starts'),
        'start.made_by': ('configs/cls/edgerecvit-base_deit-pre_8xb256-300e_in1k.py', 'its paper: DeiT-B fine-tuned'),
        'pretraining.from': ('DeiT-B', 'its paper fine-tunes the public DeiT'),
    },
)
