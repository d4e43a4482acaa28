# reViT-B as the COCO / ADE20K recipes use it: revit-s_in1k.py at ViT-B width, from its own ViT-B ImageNet-1k
# checkpoint (configs/cls/revit-base_4xb256_in1k.py).
_base_ = './revit-s_in1k.py'
backbone = dict(
    arch='base',
    init_cfg=dict(
        checkpoint='checkpoints/revit-base_in1k.pth',
        made_by='python tools/train.py configs/cls/revit-base_4xb256_in1k.py --work-dir work_dirs/revit-base_in1k'
        ' && cp $(cat work_dirs/revit-base_in1k/last_checkpoint) checkpoints/revit-base_in1k.pth',
    ),
)
backbone_recipe = dict(
    paper_start='configs/cls/revit-base_4xb256_in1k.py',
    differs={
        'start.checkpoint': ('revit-base_in1k.pth', 'its own ImageNet-1k classifier, where its paper starts'),
        'start.made_by': ('configs/cls/revit-base_4xb256_in1k.py', "from scratch, DeiT's recipe at ViT-B width"),
    },
)
