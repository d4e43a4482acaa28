# Edge-RecViT-B as the COCO / ADE20K recipes use it: edgerecvit-s_in1k.py at ViT-B width, from its own ViT-B
# ImageNet-1k checkpoint (its paper's recipe at ViT-B width, from DeiT-B: configs/cls/edgerecvit-base_deit-pre_8xb256-300e_in1k.py).
_base_ = ['./edgerecvit-s_in1k.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained(
    'edgerecvit-base_deit-pre_8xb256-300e_in1k',
    'its paper: DeiT-B fine-tuned',
    'its own ImageNet-1k checkpoint, where its paper starts',
    then={'pretraining.from': ('DeiT-B', 'its paper fine-tunes the public DeiT')},
    paper=True,
    arch='base',
    run='edgerecvit-base_in1k',
)
